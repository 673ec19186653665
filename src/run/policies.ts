/**
 * Policies saved per (side, round) in a KeyValueStore (the project database's `policies`
 * sublevel in the CLI). Keys: `<side>:<round, 6 digits>` → PolicyJSON (which carries its own
 * format version; an old one is refused on load), and `<side>:rounds` → the sorted list of
 * saved rounds. Round 0 is the SFT policy; round r ≥ 1 the policy after RL round r. The
 * project database's store also publishes every value as a sealed file for readers
 * (published.ts: `publishedPolicyStore` reads them without the database).
 */
import type { CogrDb } from '../../index/db.ts';
import { cogrError } from '../../index/errors.ts';
import type { Side } from '../../index/types.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
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

function roundKey(side: Side, round: number): string {
  return `${side}:${String(round).padStart(6, '0')}`;
}

function checkRound(round: number): void {
  if (!Number.isInteger(round) || round < 0) throw cogrError('INVALID_ARGUMENT', `round must be an integer ≥ 0, got ${round}`);
}

export async function listPolicyRounds(store: KeyValueStore, side: Side): Promise<number[]> {
  const v = await store.get(`${side}:rounds`);
  return Array.isArray(v) ? (v as number[]) : [];
}

export async function savePolicy(store: KeyValueStore, round: number, policy: EmbeddedPolicy): Promise<void> {
  checkRound(round);
  await store.put(roundKey(policy.side, round), policy.toJSON());
  const rounds = new Set(await listPolicyRounds(store, policy.side));
  rounds.add(round);
  await store.put(
    `${policy.side}:rounds`,
    [...rounds].sort((a, b) => a - b),
  );
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
