"""Constrained decoding for cogr's keyword lists: a transformers LogitsProcessor.

The answer the model may write is the bounded schema cogr's LLM path asks a server for
(generators/parse.ts `boundedKeywordListSchema`, bounds from index/core/defaults.ts
`DEFAULTS.llm`): a JSON object `{"keywords": [...]}` — or the bare array, which cogr's
parser (generators/parse.ts) reads the same — holding 1 to K strings of 1 to L characters,
then EOS. On top of the schema:

- a keyword is written from a small character set (ASCII letters, digits, space and
  `-'/.+&`; no quote or backslash, so no escapes), starts with a letter or digit, has no
  double space and at most KEYWORD_MAX_WORDS words (index/text/normalize.ts drops longer
  ones);
- a keyword whose normalised form (lower case, edge punctuation stripped per word, as
  normalizeKeyword does for ASCII) equals one already written cannot be closed, so the
  model cannot loop on one keyword ("crystalline lens","crystalline lens",...);
- after the K-th keyword only the closing `]` (and `}`) then EOS are allowed; when the
  token budget is near (RESERVE tokens left) the open string is closed and the list ended,
  and a new keyword is not started unless there is room to write and close it. Every
  answer therefore ends with EOS within max_new_tokens.

The grammar is a character automaton (`State`, `step`); tokens are checked against it by
their decoded text: pure keyword-character tokens with precomputed tensors (vectorised),
the few tokens holding a structural character (`"{}[],:` or a lone space) one by one.
Whitespace outside strings: one optional space after `{`, `:`, `[` and `,`; no newline.

No state is a dead end: a keyword shorter than L can always grow by one character, and a
token that would fill it to exactly L characters is only allowed when the keyword can then
be closed (not a duplicate). Should a state still have no allowed token, the processor
allows the forced closing instead and counts it in `stats` ("fallbacks"), so the answer
still closes (the parser de-duplicates); the forced closing near the budget likewise
closes the open keyword whatever it is.

With a `Vocabulary` (the query side's phrases: `cogr sft --export`'s vocabulary.json, the
keywords of the frozen item generation that at least minCarriers items carry), a keyword
must also be one of its phrases. The phrases sit in a character trie (`Vocabulary`) under
their normalised form; the keyword written so far, lower-cased, is a path from the trie's
root, and a character is allowed only when it extends the path to a node below which some
phrase has not been written yet (so "lens" written, "len" cannot go on to "lens" unless
"lenses" or another is still free). The closing quote is allowed only at a phrase's end,
not a duplicate. The per-node allowed tokens are found once (the trie walked to the
longest token's depth, tokens looked up by their lower-cased text) and cached by node;
the keywords already written only take a few tokens out. Every phrase is at most L
characters and KEYWORD_MAX_WORDS words of single spaces, so the trie's tokens are also
the list grammar's. A new keyword is begun only while an unwritten phrase is left and
there is room for VOCAB_ROOM text tokens; the forced closing near the budget still closes
a keyword cut midway (counted in `stats` as "off_vocabulary").
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field, replace

# The bounds of cogr's LLM schema (index/core/defaults.ts DEFAULTS.llm.maxKeywords and
# .maxKeywordLength; test/trainers/trl.real.test.ts checks they agree) and of the normaliser
# (index/text/normalize.ts KEYWORD_MAX_WORDS).
MAX_KEYWORDS = 12
MAX_KEYWORD_LENGTH = 60
KEYWORD_MAX_WORDS = 8
# Tokens kept for closing: `"` `]` `}` and EOS, one to spare.
RESERVE = 5
# With a vocabulary, a new keyword is begun only with room for this many tokens of its text
# (a phrase takes a few tokens, and the forced closing would cut it off the vocabulary).
VOCAB_ROOM = 4

KEYWORD_CHARS = frozenset(string.ascii_letters + string.digits + " -'/.+&")
STRUCTURAL = frozenset('"{}[],:')
FIRST_CHARS = frozenset(string.ascii_letters + string.digits)
PREFIX = '{"keywords":['
LEAD_CHARS = sorted(STRUCTURAL | set(PREFIX))
# Positions in PREFIX before which one optional space may come: after `{` and after `:`.
PREFIX_SPACE_BEFORE = frozenset({1, len(PREFIX) - 1})
_PUNCT = string.punctuation

# Phases of the automaton.
START, PREFIX_LIT, ARR_OPEN, STR, AFTER_ITEM, AFTER_COMMA, TAIL, DONE = range(8)


def normalize(s: str) -> str:
    """normalizeKeyword for ASCII text: lower case, words split on spaces, edge punctuation stripped."""
    words = [w.strip(_PUNCT) for w in s.lower().split()]
    return " ".join(w for w in words if w)


class _Node:
    __slots__ = ("next", "end", "count")

    def __init__(self):
        self.next: dict[str, _Node] = {}
        self.end = False  # a phrase ends here
        self.count = 0  # phrases ending at or below this node


class Vocabulary:
    """A character trie over the phrases a keyword may be, in their normalised form.

    Built from phrases (any case); a phrase the grammar cannot write exactly — a character
    outside KEYWORD_CHARS, not starting with a letter or digit, over `max_length` characters
    or KEYWORD_MAX_WORDS words, or changed by `normalize` beyond lower case — is left out and
    counted in `dropped`.
    """

    def __init__(self, phrases, max_length: int = MAX_KEYWORD_LENGTH):
        self.root = _Node()
        self.size = 0
        self.dropped = 0
        for raw in phrases:
            p = raw.lower()
            if (
                not p
                or p[0] not in FIRST_CHARS
                or len(p) > max_length
                or any(c not in KEYWORD_CHARS for c in p)
                or normalize(p) != p
                or len(p.split()) > KEYWORD_MAX_WORDS
            ):
                self.dropped += 1
                continue
            self._add(p)

    def _add(self, p: str) -> None:
        path = [self.root]
        n = self.root
        for ch in p:
            n = n.next.setdefault(ch, _Node())
            path.append(n)
        if n.end:
            return
        n.end = True
        self.size += 1
        for m in path:
            m.count += 1

    @classmethod
    def load(cls, path, max_length: int = MAX_KEYWORD_LENGTH) -> "Vocabulary":
        """vocabulary.json of `cogr sft --export` ({"format": 1, "phrases": [{"phrase", "carriers"}]}) or a JSON list of strings."""
        import json

        with open(path, encoding="utf-8") as f:
            v = json.load(f)
        if isinstance(v, dict):
            if v.get("format") != 1:
                raise ValueError(f"{path}: vocabulary format {v.get('format')!r}, expected 1")
            v = [p["phrase"] if isinstance(p, dict) else p for p in v.get("phrases", [])]
        if not isinstance(v, list) or not all(isinstance(p, str) for p in v):
            raise ValueError(f"{path}: expected a vocabulary object or a list of phrases")
        return cls(v, max_length)

    def __len__(self) -> int:
        return self.size

    def node(self, prefix: str) -> _Node | None:
        """The node of a lower-case prefix, None when no phrase starts with it."""
        n = self.root
        for ch in prefix:
            n = n.next.get(ch)
            if n is None:
                return None
        return n

    def is_phrase(self, key: str) -> bool:
        n = self.node(key)
        return n is not None and n.end

    def free_below(self, prefix: str, seen) -> bool:
        """Whether a phrase starting with `prefix` (lower case) is not in `seen` yet."""
        n = self.node(prefix)
        if n is None:
            return False
        return n.count > sum(1 for p in seen if p.startswith(prefix) and self.is_phrase(p))

    def free(self, seen) -> int:
        """Phrases not in `seen`."""
        return self.size - sum(1 for p in seen if self.is_phrase(p))


def keep_phrases(completion: str, vocab: Vocabulary) -> tuple[str, int, int]:
    """The vocabulary filter (cogr_trl.py --vocabulary-mode filter): the answer with every
    keyword that is no phrase of `vocab` (compared normalised, as the trie is) left out, and
    a keyword written twice kept once, as `{"keywords":[...]}`; with how many keywords the
    answer held and how many were left out. An answer that is not a keyword list (the
    object or the bare array) comes back unchanged, for cogr's parser to judge."""
    import json

    try:
        v = json.loads(completion)
    except ValueError:
        return completion, 0, 0
    ks = v.get("keywords") if isinstance(v, dict) else v
    if not isinstance(ks, list) or not all(isinstance(k, str) for k in ks):
        return completion, 0, 0
    kept: list[str] = []
    seen: set[str] = set()
    for k in ks:
        key = normalize(k)
        if key in seen or not vocab.is_phrase(key):
            continue
        seen.add(key)
        kept.append(k)
    return json.dumps({"keywords": kept}, separators=(",", ":")), len(ks), len(ks) - len(kept)


@dataclass(frozen=True)
class State:
    phase: int = START
    pos: int = 0  # PREFIX_LIT: index of the next PREFIX character
    space: bool = False  # an optional space was just written (no second one)
    wrapped: bool = False  # the answer opened with `{"keywords":`
    buf: str = ""  # STR: the keyword so far
    count: int = 0  # keywords closed
    seen: frozenset = field(default_factory=frozenset)  # their normalised forms


def closing(s: State) -> str:
    """The shortest text that ends the answer from s (EOS after it)."""
    tail = "]}" if s.wrapped else "]"
    if s.phase == STR:
        return '"' + tail
    if s.phase == AFTER_ITEM:
        return tail
    if s.phase == TAIL:
        return "}"
    return ""


def step(s: State, ch: str, k: int, length: int, room: int, vocab: Vocabulary | None = None) -> State | None:
    """The state after writing ch, or None when ch is not allowed. room: tokens left after this one.

    vocab: the keyword must be one of its phrases (module doc)."""
    p = s.phase
    if p == START:
        if ch == "{":
            return replace(s, phase=PREFIX_LIT, pos=1, wrapped=True)
        if ch == "[":
            return replace(s, phase=ARR_OPEN)
        return None
    if p == PREFIX_LIT:
        if ch == " " and not s.space and s.pos in PREFIX_SPACE_BEFORE:
            return replace(s, space=True)
        if ch != PREFIX[s.pos]:
            return None
        if s.pos + 1 == len(PREFIX):
            return replace(s, phase=ARR_OPEN, pos=0, space=False)
        return replace(s, pos=s.pos + 1, space=False)
    if p in (ARR_OPEN, AFTER_COMMA):
        if ch == " " and not s.space:
            return replace(s, space=True)
        if ch == '"':
            return replace(s, phase=STR, buf="", space=False)
        return None
    if p == STR:
        b = s.buf
        if ch == '"':
            n = normalize(b)
            if not n or n in s.seen:
                return None
            if vocab is not None and not vocab.is_phrase(b.lower()):
                return None
            return replace(s, phase=AFTER_ITEM, buf="", count=s.count + 1, seen=s.seen | {n})
        if ch not in KEYWORD_CHARS or len(b) >= length:
            return None
        if not b and ch not in FIRST_CHARS:
            return None
        if ch == " " and (b.endswith(" ") or len(b.split()) >= KEYWORD_MAX_WORDS):
            return None
        if vocab is not None and not vocab.free_below((b + ch).lower(), s.seen):
            return None
        return replace(s, buf=b + ch)
    if p == AFTER_ITEM:
        if ch == ",":
            # A new keyword needs `"`, one token of text (VOCAB_ROOM with a vocabulary, and a phrase
            # not written yet), then the closing: refuse it without that room.
            if vocab is not None and (room <= RESERVE + 1 + VOCAB_ROOM or vocab.free(s.seen) == 0):
                return None
            return replace(s, phase=AFTER_COMMA, space=False) if s.count < k and room > RESERVE + 2 else None
        if ch == "]":
            return replace(s, phase=TAIL if s.wrapped else DONE)
        return None
    if p == TAIL:
        return replace(s, phase=DONE) if ch == "}" else None
    return None  # DONE: only EOS, which is not a character


def step_text(s: State, text: str, k: int, length: int, room: int, vocab: Vocabulary | None = None) -> State | None:
    for ch in text:
        s = step(s, ch, k, length, room, vocab)
        if s is None:
            return None
    return s


class KeywordListProcessor:
    """A transformers LogitsProcessor masking every token the keyword-list grammar forbids.

    One instance per `generate` call: it learns the prompt length on its first call and
    follows each row's last sampled token from then on. Built by `KeywordGrammar.processor`.
    """

    def __init__(self, grammar: "KeywordGrammar", max_new_tokens: int):
        self.g = grammar
        self.max_new_tokens = max_new_tokens
        self.prompt_len: int | None = None
        self.states: list[State | None] = []  # None: the row wrote EOS (generate pads it from then on)
        self.calls = 0
        self.stats = grammar.stats

    def __call__(self, input_ids, scores):
        import time

        import torch

        t0 = time.perf_counter()
        self.calls += 1
        g = self.g
        if self.prompt_len is None:
            self.prompt_len = input_ids.shape[1]
            self.states = [State() for _ in range(input_ids.shape[0])]
        else:
            written = input_ids.shape[1] - self.prompt_len
            room = self.max_new_tokens - written  # tokens left, the next one included
            for b in range(input_ids.shape[0]):
                s = self.states[b]
                if s is None:
                    continue
                t = int(input_ids[b, -1])
                if t in g.eos_ids:
                    self.states[b] = None
                    continue
                nxt = g.advance(s, t, room + 1)
                if nxt is None:
                    # Only a masked token gets here: a processor after this one or a sampler bug.
                    raise RuntimeError(f"keyword grammar: row {b} sampled token {t} ({g.text[t]!r}) that the grammar forbids after {s}")
                self.states[b] = nxt
        room = self.max_new_tokens - (input_ids.shape[1] - self.prompt_len)
        allow = torch.zeros_like(scores, dtype=torch.bool)
        for b, s in enumerate(self.states):
            if s is None:
                allow[b] = True  # finished: generate writes pad tokens whatever is sampled
                continue
            allow[b, g.allowed(s, room)] = True
        self.stats["seconds"] += time.perf_counter() - t0
        return scores.masked_fill(~allow, float("-inf"))


class KeywordGrammar:
    """The token tables of one tokenizer, shared by every processor built from it."""

    def __init__(
        self, tok, vocab_size: int, max_keywords: int = MAX_KEYWORDS, max_length: int = MAX_KEYWORD_LENGTH, vocabulary: Vocabulary | None = None
    ):
        import torch

        if max_keywords < 1 or max_length < 1:
            raise ValueError(f"keyword grammar bounds must be positive, got {max_keywords} keywords of {max_length} characters")
        self.k = max_keywords
        self.length = max_length
        self.vocab_size = vocab_size
        eos = tok.eos_token_id
        self.eos_ids = frozenset([eos] if isinstance(eos, int) else eos)
        special = set(getattr(tok, "all_special_ids", []))
        self.text: list[str | None] = [None] * vocab_size
        n_tok = min(len(tok), vocab_size)
        for t in range(n_tok):
            if t in special:
                continue
            s = tok.decode([t], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            if s and all(32 <= ord(c) < 127 for c in s) and "\\" not in s:
                self.text[t] = s
        big = max_length + 1_000
        str_len = torch.full((vocab_size,), big, dtype=torch.long)
        starts_space = torch.zeros(vocab_size, dtype=torch.bool)
        ends_space = torch.zeros(vocab_size, dtype=torch.bool)
        starts_first = torch.zeros(vocab_size, dtype=torch.bool)
        has_space = torch.zeros(vocab_size, dtype=torch.bool)
        words = torch.zeros(vocab_size, dtype=torch.long)  # words the token starts (a word begins after a space or at the start)
        self.quoted: list[int] = []  # tokens holding a quote: checked one by one inside a string
        self.by_lead: dict[str, list[int]] = {}  # tokens by their first non-space character ('' for all spaces)
        self.by_text: dict[str, list[int]] = {}
        for t, s in enumerate(self.text):
            if s is None:
                continue
            self.by_text.setdefault(s, []).append(t)
            self.by_lead.setdefault(s.lstrip(" ")[:1], []).append(t)
            if '"' in s:
                self.quoted.append(t)
            if all(c in KEYWORD_CHARS for c in s) and "  " not in s:
                str_len[t] = len(s)
                starts_space[t] = s[0] == " "
                ends_space[t] = s[-1] == " "
                starts_first[t] = s[0] in FIRST_CHARS
                has_space[t] = " " in s
                words[t] = sum(1 for i, c in enumerate(s) if c != " " and (i == 0 or s[i - 1] == " "))
        self.str_len, self.starts_space, self.ends_space = str_len, starts_space, ends_space
        self.starts_first, self.has_space, self.words = starts_first, has_space, words
        self.eos_list = sorted(self.eos_ids)
        self.stats = {"fallbacks": 0, "forced": 0, "seconds": 0.0, "off_vocabulary": 0}
        # The vocabulary constraint (module doc): keyword-character tokens by lower-cased text,
        # the quoted tokens split at their first quote, and the allowed tokens of each trie node.
        self.vocab = vocabulary
        self.by_lower: dict[str, list[int]] = {}
        self.quoted_split: list[tuple[int, str]] = []
        self.max_token_chars = 0
        self._node_cache: dict[str, tuple[list[int], list[int]]] = {}
        if vocabulary is not None:
            for t, s in enumerate(self.text):
                if s is None:
                    continue
                if int(str_len[t]) <= max_length:
                    self.by_lower.setdefault(s.lower(), []).append(t)
                    self.max_token_chars = max(self.max_token_chars, len(s))
                elif '"' in s:
                    head = s[: s.index('"')]
                    if all(c in KEYWORD_CHARS for c in head):
                        self.quoted_split.append((t, head.lower()))

    def processor(self, max_new_tokens: int) -> KeywordListProcessor:
        return KeywordListProcessor(self, max_new_tokens)

    def advance(self, s: State, t: int, room: int) -> State | None:
        """The state after token t was sampled with `room` tokens left (t included)."""
        text = self.text[t] if 0 <= t < self.vocab_size else None
        if text is None:
            return None
        if room <= RESERVE and closing(s).startswith(text):
            return self._forced_step(s, text)
        nxt = step_text(s, text, self.k, self.length, room - 1, self.vocab)
        if nxt is None and closing(s).startswith(text):
            return self._forced_step(s, text)  # a fallback `allowed` gave (see the module's doc)
        return nxt

    def _forced_step(self, s: State, text: str) -> State:
        # The forced closing ignores the duplicate and empty-keyword rules: the answer must end.
        for ch in text:
            if s.phase == STR:
                n = normalize(s.buf)
                if self.vocab is not None and not self.vocab.is_phrase(s.buf.lower()):
                    self.stats["off_vocabulary"] += 1
                s = replace(s, phase=AFTER_ITEM, buf="", count=s.count + (1 if n else 0), seen=s.seen | ({n} if n else set()))
            elif s.phase == AFTER_ITEM:
                s = replace(s, phase=TAIL if s.wrapped else DONE)
            elif s.phase == TAIL:
                s = replace(s, phase=DONE)
        return s

    def _closing_ids(self, s: State) -> list[int]:
        c = closing(s)
        return [t for i in range(1, len(c) + 1) for t in self.by_text.get(c[:i], [])]

    def _node_tokens(self, key: str) -> tuple[list[int], list[int]]:
        """Below trie node `key`: the keyword-character tokens whose lower-cased text continues it
        (the trie walked to the longest token's depth), and the quoted tokens whose text before
        the quote ends a phrase there. Cached by node."""
        hit = self._node_cache.get(key)
        if hit is not None:
            return hit
        node = self.vocab.node(key)
        plain: list[int] = []
        if node is not None:
            stack = [(node, "")]
            while stack:
                n, path = stack.pop()
                if len(path) >= self.max_token_chars:
                    continue
                for ch, m in n.next.items():
                    p = path + ch
                    plain += self.by_lower.get(p, [])
                    stack.append((m, p))
        quoted = [t for t, head in self.quoted_split if self.vocab.is_phrase(key + head)]
        hit = (sorted(plain), quoted)
        self._node_cache[key] = hit
        return hit

    def _allowed_in_vocab(self, s: State, room: int) -> list[int]:
        """Inside a string under the vocabulary: the node's tokens, less those that lead only to phrases already written."""
        key = s.buf.lower()
        plain, quoted = self._node_tokens(key)
        out = plain
        spent = [p for p in s.seen if p.startswith(key) and len(p) > len(key)]
        if spent:
            gone: set[int] = set()
            for p in spent:
                for i in range(len(key) + 1, min(len(p), len(key) + self.max_token_chars) + 1):
                    if not self.vocab.free_below(p[:i], s.seen):
                        gone.update(self.by_lower.get(p[len(key) : i], []))
            if gone:
                out = [t for t in plain if t not in gone]
        return out + [t for t in quoted if step_text(s, self.text[t], self.k, self.length, room - 1, self.vocab) is not None]

    def allowed(self, s: State, room: int) -> list[int]:
        """Token ids allowed from s when `room` tokens are left (this one included)."""
        if s.phase == DONE:
            return self.eos_list
        if room <= RESERVE and s.phase in (STR, AFTER_ITEM, TAIL):
            self.stats["forced"] += 1
            return self._closing_ids(s)
        out: list[int] = []
        if s.phase == STR and self.vocab is not None:
            out = self._allowed_in_vocab(s, room)
        elif s.phase == STR:
            import torch

            b = s.buf
            m = self.str_len <= self.length - len(b)
            if not b:
                m &= self.starts_first
            elif b.endswith(" "):
                m &= ~self.starts_space
            nw = len(b.split())
            if b and not b.endswith(" "):
                nw_after = nw + self.words - (~self.starts_space).long()  # a token glued to the last word continues it
            else:
                nw_after = nw + self.words
            # Conservative (every token let through is one `step` accepts): a token holding a
            # space only while fewer than KEYWORD_MAX_WORDS words are written with it.
            m &= (nw_after <= KEYWORD_MAX_WORDS) & (~self.has_space | (nw_after < KEYWORD_MAX_WORDS))
            # A token that fills the keyword to L characters leaves only the closing quote: it is let
            # through only when that close is allowed (not a duplicate), so no state is a dead end.
            full = self.length - len(b)
            at_limit = set(torch.nonzero(m & (self.str_len == full)).flatten().tolist()) if full > 0 else set()
            dead = {t for t in at_limit if not normalize(b + self.text[t]) or normalize(b + self.text[t]) in s.seen}
            out = [t for t in torch.nonzero(m).flatten().tolist() if t not in dead]
            out += [t for t in self.quoted if step_text(s, self.text[t], self.k, self.length, room - 1) is not None]
        else:
            # Outside a string only a few characters can come next: check the tokens that lead with one of them.
            v = self.vocab
            after_space = step(s, " ", self.k, self.length, room - 1, v)
            leads = [c for c in LEAD_CHARS if step(s, c, self.k, self.length, room - 1, v) or (after_space and step(after_space, c, self.k, self.length, room - 1, v))]
            for c in leads + [""]:
                out += [t for t in self.by_lead.get(c, []) if step_text(s, self.text[t], self.k, self.length, room - 1, v) is not None]
        if not out:
            self.stats["fallbacks"] += 1
            out = self._closing_ids(s) or self.eos_list
        return out
