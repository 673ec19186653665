/**
 * Generators saved per round in a KeyValueStore (the project database's `policies`
 * sublevel in the CLI):
 *   item:<round, 6 digits>     the item policy (PolicyJSON)
 *   planner:<round, 6 digits>  the query planner (PlannerJSON: parameters and relevance model)
 *   <kind>:rounds              the sorted list of saved rounds of that kind
 * Each document carries its own format version; an old one is refused on load. Round 0 is
 * SFT; round r ≥ 1 what RL round r trained. A planner is loaded over the run's items (their
 * texts rebuild its relevance model's BM25 index). The project database's store also
 * publishes every value as a sealed file for readers (published.ts: `publishedPolicyStore`
 * reads them without the database).
 */
import type { CogrDb } from '../../index/store/db.ts';
import { cogrError } from '../../index/core/errors.ts';
import type { Side } from '../../index/core/types.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import type { RelevanceItem, RelevanceModel } from '../../generators/planner/relevance.ts';
import type { KeyValueStore } from '../../generators/types.ts';
import { publishPolicyValue } from './published.ts';

export const POLICY_SUBLEVEL = 'policies';
/** The generation cache of the LLM generator (generators/llm.ts). */
export const LLM_CACHE_SUBLEVEL = 'llm-cache';

/** The policy store of a project database; every value put is also published for readers (published.ts). */
export function policyStore(db: CogrDb): KeyValueStore {
  const sub = db.sublevel(POLICY_SUBLEVEL);
  return {
    get: (key) => sub.get(key),
    async put(key, value) {
      await sub.put(key, value);
      await publishPolicyValue(db.path, key, value);
    },
  };
}

/** The LLM generation cache of a project database. */
export function llmCache(db: CogrDb): KeyValueStore {
  return db.sublevel(LLM_CACHE_SUBLEVEL);
}

type Kind = Side | 'planner';

function roundKey(kind: Kind, round: number): string {
  return `${kind}:${String(round).padStart(6, '0')}`;
}

function checkRound(round: number): void {
  if (!Number.isInteger(round) || round < 0) throw cogrError('INVALID_ARGUMENT', `round must be an integer ≥ 0, got ${round}`);
}

export async function listPolicyRounds(store: KeyValueStore, kind: Kind): Promise<number[]> {
  const v = await store.get(`${kind}:rounds`);
  return Array.isArray(v) ? (v as number[]) : [];
}

async function addRound(store: KeyValueStore, kind: Kind, round: number): Promise<void> {
  const rounds = new Set(await listPolicyRounds(store, kind));
  rounds.add(round);
  await store.put(
    `${kind}:rounds`,
    [...rounds].sort((a, b) => a - b),
  );
}

async function resolveRound(store: KeyValueStore, kind: Kind, round: number | 'latest', what: string, hint: string): Promise<number> {
  if (round !== 'latest') {
    checkRound(round);
    return round;
  }
  const rounds = await listPolicyRounds(store, kind);
  if (rounds.length === 0) throw cogrError('NOT_FOUND', `no ${what} has been saved (${hint})`);
  return rounds[rounds.length - 1];
}

/** The dataset a planner's relevance model was fitted over (its items rebuild the planner). */
export interface PlannerSource {
  dataset: string;
  format?: string;
}

/** Save a round's planner, and the dataset it was fitted over when given (`planner:source`). */
export async function savePlanner(store: KeyValueStore, round: number, planner: KeywordPlanner, source?: PlannerSource): Promise<void> {
  checkRound(round);
  await store.put(roundKey('planner', round), planner.toJSON());
  if (source) await store.put('planner:source', source);
  await addRound(store, 'planner', round);
}

/** The dataset the saved planners were fitted over, when recorded. */
export async function plannerSource(store: KeyValueStore): Promise<PlannerSource | null> {
  const v = (await store.get('planner:source')) as PlannerSource | undefined;
  return v && typeof v.dataset === 'string' ? v : null;
}

/**
 * The saved planner document (its JSON, not rebuilt) that serves `round`: the planner of
 * round `exact` when given and saved (the run's best step fixes it), else the round's, or
 * the newest saved at or before it, the oldest when none is (`round` null: the newest);
 * null when the store holds no planner.
 */
export async function readServedPlanner(
  store: KeyValueStore,
  round: number | null,
  exact?: number,
): Promise<{ round: number; json: unknown } | null> {
  const rounds = await listPolicyRounds(store, 'planner');
  if (rounds.length === 0) return null;
  const usable = round === null ? rounds : rounds.filter((r) => r <= round);
  const pick = exact !== undefined && rounds.includes(exact) ? exact : usable.length ? usable[usable.length - 1] : rounds[0];
  checkRound(pick);
  const json = await store.get(roundKey('planner', pick));
  return json === undefined ? null : { round: pick, json };
}

/** Load the query planner of a round (`'latest'`: the highest saved) over the run's items. */
export async function loadPlanner(
  store: KeyValueStore,
  round: number | 'latest',
  items: readonly RelevanceItem[],
  reuse?: RelevanceModel | null,
): Promise<KeywordPlanner> {
  const r = await resolveRound(store, 'planner', round, 'query planner', 'run cogr demo, cogr evolve or cogr sft first');
  const json = await store.get(roundKey('planner', r));
  if (json === undefined) {
    const rounds = await listPolicyRounds(store, 'planner');
    throw cogrError('NOT_FOUND', `no query planner for round ${r} (saved rounds: ${rounds.length ? rounds.join(', ') : 'none'})`);
  }
  return KeywordPlanner.fromJSON(json, items, reuse);
}

export async function savePolicy(store: KeyValueStore, round: number, policy: EmbeddedPolicy): Promise<void> {
  checkRound(round);
  await store.put(roundKey(policy.side, round), policy.toJSON());
  await addRound(store, policy.side, round);
}

/** Load the policy of a side and round; `'latest'` picks the highest saved round. */
export async function loadPolicy(store: KeyValueStore, side: Side, round: number | 'latest'): Promise<EmbeddedPolicy> {
  let r = round;
  if (r === 'latest') {
    const rounds = await listPolicyRounds(store, side);
    if (rounds.length === 0) throw cogrError('NOT_FOUND', `no ${side} policy has been saved (run cogr sft first)`);
    r = rounds[rounds.length - 1];
  }
  checkRound(r);
  const json = await store.get(roundKey(side, r));
  if (json === undefined) {
    const rounds = await listPolicyRounds(store, side);
    throw cogrError('NOT_FOUND', `no ${side} policy for round ${r} (saved rounds: ${rounds.length ? rounds.join(', ') : 'none'})`);
  }
  const p = EmbeddedPolicy.fromJSON(json);
  if (p.side !== side) throw cogrError('DB_CORRUPT', `policy stored as ${side} round ${r} is a ${p.side} policy`);
  return p;
}
