/**
 * The served round's query-side generator as a document that a keyword worker can
 * rebuild (keywordPool.ts): loading it on the main thread (`loadQueryGenerator`, from the
 * published policies) and rebuilding it in a worker (`rebuildQueryGenerator`, once per
 * worker and generation) are the only two places that know what the generator is. Today
 * it is the round's embedded query policy, decoded greedily with the served item view
 * attached as its opposite index.
 */
import type { Item } from '../../index/types.ts';
import type { KeywordView } from '../../index/view.ts';
import type { KeyValueStore } from '../../generators/types.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { listPolicyRounds } from '../run/policies.ts';

/** What crosses to the workers: plain JSON. */
export interface QueryGeneratorDocument {
  kind: 'embedded-policy';
  /** The policy round the document was saved as. */
  round: number;
  json: unknown;
}

/** A generator rebuilt in a worker: one query text in, its keywords out. */
export interface QueryPlanner {
  plan(text: string): string[] | Promise<string[]>;
}

/**
 * The query generator serving `round` (the round's policy, or the newest saved at or
 * before it; the oldest when none is), or null when the database saved none.
 */
export async function loadQueryGenerator(policies: KeyValueStore, round: number | null): Promise<QueryGeneratorDocument | null> {
  const rounds = await listPolicyRounds(policies, 'query');
  if (rounds.length === 0) return null;
  const usable = round === null ? rounds : rounds.filter((r) => r <= round);
  const pick = usable.length ? usable[usable.length - 1] : rounds[0];
  const json = await policies.get(`query:${String(pick).padStart(6, '0')}`);
  if (json === undefined) return null;
  return { kind: 'embedded-policy', round: pick, json };
}

/** Rebuild a generator from its document against the served item view (in a keyword worker). */
export function rebuildQueryGenerator(doc: QueryGeneratorDocument, itemView: KeywordView, _items: readonly Item[] | null): QueryPlanner {
  const policy = EmbeddedPolicy.fromJSON(doc.json);
  policy.attachOpposite(itemView);
  return {
    // Greedy decoding, as before the workers: the same query always gets the same keywords.
    async plan(text: string): Promise<string[]> {
      const out = await policy.generate('query', [{ id: 'http', text }], { samples: 1, temperature: 0 });
      const s = out[0]?.[0];
      if (!s || s.format !== 'ok') throw new Error('the generator output is not a keyword list');
      return s.keywords;
    },
  };
}
