"""Unit tests of keyword_grammar.py on a small made-up vocabulary (no model, no checkpoint).

    python -m unittest trainers/trl/test_keyword_grammar.py     (test/trainers/trl.real.test.ts runs it in the venv)

A scorer that always prefers one keyword's tokens (what an 8-step SFT model does) is decoded
greedily through the processor: the answer must still be a closed JSON keyword list, each
keyword once, at most K of them, at most L characters each, EOS within the budget. With a
vocabulary (VocabularyTest), every keyword is one of its phrases.
"""
from __future__ import annotations

import json
import sys
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from keyword_grammar import KEYWORD_MAX_WORDS, RESERVE, KeywordGrammar, State, Vocabulary, keep_phrases, normalize, step_text  # noqa: E402

VOCAB = ["<pad>", "<eos>", '{"', "keywords", '":', ' ["', "[", '["', '"', '","', '", "', ",", "]", "]}", '"]', '"]}', "}", " ",
         "crystal", "line", " lens", " lenses", "Lens", "lens", "x", " x", "cat", "ar", "act", "  ", "\n", '"x"', "é", "a\\b"]


class FakeTok:
    eos_token_id = 1
    all_special_ids = [0, 1]

    def __len__(self):
        return len(VOCAB)

    def decode(self, ids, **kw):
        return "".join(VOCAB[i] for i in ids)


def ids(*texts):
    return [VOCAB.index(t) for t in texts]


def decode_greedy(g, prefer, budget, rows=1):
    """Greedy decoding where `prefer` ranks the token texts the scorer likes best (first = best)."""
    base = torch.full((len(VOCAB),), -10.0)
    for rank, t in enumerate(prefer):
        base[VOCAB.index(t)] = 10.0 - rank * 0.1
    proc = g.processor(budget)
    seq = torch.zeros((rows, 3), dtype=torch.long)  # a 3-token "prompt"
    for _ in range(budget):
        scores = proc(seq, base.repeat(rows, 1).clone())
        nxt = scores.argmax(dim=1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
        if all(int(r[-1]) == 1 or 1 in r[3:].tolist() for r in seq):
            break
    return ["".join(VOCAB[i] for i in r[3:].tolist() if i != 1) for r in seq], [1 in r[3:].tolist() for r in seq]


class GrammarTest(unittest.TestCase):
    def setUp(self):
        self.g = KeywordGrammar(FakeTok(), vocab_size=len(VOCAB) + 3, max_keywords=3, max_length=12)

    def test_normalize_as_cogr(self):
        self.assertEqual(normalize("  Crystalline  Lens. "), "crystalline lens")
        self.assertEqual(normalize("'covid-19'"), "covid-19")
        self.assertEqual(normalize("..."), "")

    def test_a_looping_scorer_still_closes_without_repeats(self):
        # The scorer wants `crystal line lens` again and again, as the cut-off SFT answers did.
        prefer = ['{"', "keywords", '":', ' ["', "crystal", "line", " lens", '","', " lenses", "Lens", "x", '"]}', "<eos>"]
        texts, ended = decode_greedy(self.g, prefer, budget=60)
        self.assertTrue(ended[0], texts)
        v = json.loads(texts[0])
        kws = v["keywords"]
        self.assertGreaterEqual(len(kws), 1)
        self.assertLessEqual(len(kws), 3)
        self.assertEqual(len({normalize(k) for k in kws}), len(kws), kws)
        self.assertTrue(all(1 <= len(k) <= 12 for k in kws), kws)
        self.assertEqual(self.g.stats["fallbacks"], 0)

    def test_the_budget_forces_the_closing(self):
        prefer = ["[", '"', "crystal", "line", " lens", " x", "x", '"]', "<eos>"]
        for budget in range(RESERVE + 2, 16):
            texts, ended = decode_greedy(self.g, prefer, budget=budget)
            self.assertTrue(ended[0], (budget, texts))
            self.assertIsInstance(json.loads(texts[0]), list, (budget, texts))

    def test_forbidden_tokens(self):
        g = self.g
        s = step_text(State(), '{"keywords": ["', g.k, g.length, 100)
        self.assertIsNotNone(s)
        allowed = {VOCAB[t] for t in g.allowed(s, 100)}
        # A keyword starts with a letter or digit; no space, quote, newline, non-ASCII or backslash.
        self.assertIn("crystal", allowed)
        self.assertNotIn(" lens", allowed)
        self.assertNotIn('"', allowed)
        for bad in ("\n", "  ", "é", "a\\b", "<eos>", "<pad>"):
            self.assertNotIn(bad, allowed)
        # Ids past the tokenizer (the model's padded vocabulary) are never allowed.
        self.assertTrue(all(t < len(VOCAB) for t in g.allowed(s, 100)))
        # A duplicate (after normalisation) cannot be closed; another keyword can.
        s2 = step_text(s, 'Lens","lens', g.k, g.length, 100)
        self.assertIsNotNone(s2)
        closers = {VOCAB[t] for t in g.allowed(s2, 100)} & {'"', '","', '"]', '"]}', '", "'}
        self.assertEqual(closers, set())
        # After K keywords only the end of the list.
        s3 = step_text(s, 'a","b","c"', g.k, g.length, 100)
        self.assertEqual({VOCAB[t] for t in g.allowed(s3, 100)}, {"]", "]}"})
        # A keyword of L characters can only be closed.
        s4 = step_text(s, "x" * 12, g.k, g.length, 100)
        self.assertTrue({VOCAB[t] for t in g.allowed(s4, 100)} <= {'"', '","', '"]', '"]}', '", "'})

    def test_word_limit(self):
        g = self.g = KeywordGrammar(FakeTok(), vocab_size=len(VOCAB), max_keywords=3, max_length=60)
        s = step_text(State(), '["' + " ".join(["x"] * KEYWORD_MAX_WORDS), g.k, g.length, 100)
        self.assertIsNotNone(s)
        allowed = {VOCAB[t] for t in g.allowed(s, 100)}
        self.assertNotIn(" x", allowed)
        self.assertNotIn(" ", allowed)
        self.assertIn("x", allowed)

    def test_batch_rows_are_independent(self):
        prefer = ["[", '"', "cat", "ar", "act", '","', "crystal", '"]', "<eos>"]
        texts, ended = decode_greedy(self.g, prefer, budget=40, rows=3)
        self.assertEqual(len(set(texts)), 1)
        self.assertTrue(all(ended))
        self.assertTrue(all(isinstance(json.loads(t), list) for t in texts))


CLOSERS = {'"', '","', '"]', '"]}', '", "'}


class VocabularyTest(unittest.TestCase):
    """The trie constraint: a keyword is a phrase of the vocabulary (keyword_grammar.Vocabulary)."""

    PHRASES = ["Crystalline Lens", "cataract", "lens", "xx", "crystal"]

    def grammar(self, phrases=None, k=3):
        self.v = Vocabulary(phrases or self.PHRASES, max_length=20)
        return KeywordGrammar(FakeTok(), vocab_size=len(VOCAB) + 3, max_keywords=k, max_length=20, vocabulary=self.v)

    def at(self, g, text, room=100):
        s = step_text(State(), text, g.k, g.length, room, g.vocab)
        self.assertIsNotNone(s, text)
        return s, {VOCAB[t] for t in g.allowed(s, room)}

    def test_the_trie(self):
        v = Vocabulary(["Crystalline Lens", "lens", "c++", "é", " lens", "a  b", "x" * 30, "lens"], max_length=20)
        self.assertEqual(len(v), 2)  # "c++" normalises to "c", "é" and the spaced or over-long ones cannot be written
        self.assertEqual(v.dropped, 5)
        self.assertTrue(v.is_phrase("crystalline lens"))
        self.assertFalse(v.is_phrase("crystalline"))
        self.assertIsNotNone(v.node("crystal"))
        self.assertIsNone(v.node("crystals"))
        self.assertTrue(v.free_below("l", set()))
        self.assertFalse(v.free_below("l", {"lens"}))

    def test_a_keyword_outside_the_vocabulary_cannot_be_written_or_closed(self):
        g = self.grammar()
        _, allowed = self.at(g, '["')
        self.assertEqual(allowed, {"crystal", "cat", "x", "lens", "Lens"})  # the tokens that begin a phrase
        self.assertNotIn("ar", allowed)
        self.assertNotIn("act", allowed)
        self.assertIsNone(step_text(State(), '["cart', g.k, g.length, 100, g.vocab))
        # "cat" is a prefix of "cataract", not a phrase: it cannot be closed.
        _, allowed = self.at(g, '["cat')
        self.assertEqual(allowed & CLOSERS, set())
        self.assertIn("ar", allowed)
        self.assertIsNone(step_text(State(), '["cat"', g.k, g.length, 100, g.vocab))
        # Without the vocabulary the same keyword is fine.
        self.assertIsNotNone(step_text(State(), '["cat"', g.k, g.length, 100))

    def test_a_prefix_continues_and_a_complete_phrase_closes(self):
        g = self.grammar()
        _, allowed = self.at(g, '["crystal')
        self.assertIn("line", allowed)
        self.assertTrue(allowed & CLOSERS)  # "crystal" is a phrase too
        _, allowed = self.at(g, '["crystalline')
        self.assertIn(" lens", allowed)
        self.assertNotIn(" lenses", allowed)  # "crystalline lenses" is not a phrase
        self.assertEqual(allowed & CLOSERS, set())
        _, allowed = self.at(g, '["Crystalline Lens')  # case as normalize(): the phrase in any case
        self.assertTrue({'"', '"]'} <= allowed, allowed)
        s, _ = self.at(g, '["Crystalline Lens","cataract"')
        self.assertEqual(s.seen, frozenset({"crystalline lens", "cataract"}))

    def test_duplicates_are_refused(self):
        g = self.grammar()
        # "crystal" written: "crystal" cannot be closed again, but "crystalline lens" can still be written.
        _, allowed = self.at(g, '["crystal","crystal')
        self.assertEqual(allowed & CLOSERS, set())
        self.assertIn("line", allowed)
        # "cataract" and "lens" written: nothing else starts with "cat" or "lens", so they cannot even be begun.
        _, allowed = self.at(g, '["cataract","Lens","')
        self.assertEqual(allowed, {"crystal", "x"})
        self.assertIsNone(step_text(State(), '["cataract","cat', g.k, g.length, 100, g.vocab))
        self.assertIsNone(step_text(State(), '["lens","lens', g.k, g.length, 100, g.vocab))

    def test_no_new_keyword_once_every_phrase_is_written(self):
        g = self.grammar(["crystal", "cataract"], k=5)
        _, allowed = self.at(g, '["crystal","cataract"')
        self.assertEqual(allowed, {"]"})  # only the end of the list: no comma, though K is 5

    def test_a_looping_scorer_writes_only_phrases(self):
        g = self.grammar(k=4)
        # The scorer wants "lens", "crystal line lens" and "cat ar act" over and over, and "act" or "ar" anywhere.
        prefer = ['{"', "keywords", '":', ' ["', "lens", "act", "ar", "crystal", "line", " lens", '","', "cat", "x", '"]}', "<eos>"]
        texts, ended = decode_greedy(g, prefer, budget=80)
        self.assertTrue(ended[0], texts)
        kws = json.loads(texts[0])["keywords"]
        self.assertEqual(kws, ["lens", "crystalline lens", "crystal", "cataract"])
        self.assertTrue(all(self.v.is_phrase(k.lower()) for k in kws), kws)
        self.assertEqual(len({normalize(k) for k in kws}), len(kws), kws)
        self.assertEqual(g.stats["fallbacks"], 0)
        self.assertEqual(g.stats["off_vocabulary"], 0)

    def test_the_budget_still_closes(self):
        g = self.grammar()
        prefer = ["[", '"', "crystal", "line", " lens", "x", '"]', "<eos>"]
        for budget in range(RESERVE + 2, 20):
            texts, ended = decode_greedy(g, prefer, budget=budget)
            self.assertTrue(ended[0], (budget, texts))
            self.assertIsInstance(json.loads(texts[0]), list, (budget, texts))

    def test_the_node_cache(self):
        g = self.grammar()
        s, first = self.at(g, '["crystal')
        self.assertIn("crystal", g._node_cache)
        self.assertEqual({VOCAB[t] for t in g.allowed(s, 100)}, first)


class PhraseFilterTest(unittest.TestCase):
    """The vocabulary filter (--vocabulary-mode filter): off-vocabulary keywords are left out of an answer."""

    v = Vocabulary(["crystalline lens", "cataract", "lens"], max_length=20)

    def test_off_vocabulary_and_repeated_keywords_are_left_out(self):
        text, n, dropped = keep_phrases('{"keywords":["Crystalline Lens","a-crystallin","lens.","cataract","LENS","lenses"]}', self.v)
        self.assertEqual(json.loads(text), {"keywords": ["Crystalline Lens", "lens.", "cataract"]})
        self.assertEqual((n, dropped), (6, 3))

    def test_the_bare_array_and_an_empty_result(self):
        text, n, dropped = keep_phrases('["retina", "cornea"]', self.v)
        self.assertEqual(json.loads(text), {"keywords": []})
        self.assertEqual((n, dropped), (2, 2))

    def test_an_answer_that_is_no_keyword_list_is_left_as_it_is(self):
        for bad in ['{"keywords":["lens"', "lens, cataract", '{"keywords": "lens"}', '{"keywords":[1, "lens"]}']:
            self.assertEqual(keep_phrases(bad, self.v), (bad, 0, 0))


if __name__ == "__main__":
    unittest.main()
