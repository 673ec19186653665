/**
 * The embedded policy as JSON (saved per side and round by src/run/policies.ts, or as a
 * file for `cogr generate --policy-file`). The document carries its own format name and
 * version; another version is refused with DB_VERSION, never misread.
 */
import { cogrError } from '../../index/core/errors.ts';
import type { Side } from '../../index/core/types.ts';
import { D, type WordStats } from './candidates.ts';
import { STOP_A, STOP_B, type PolicyConfig, type PolicyParams } from './params.ts';
import type { Vocabulary, VocabularyJSON } from './vocabulary.ts';

export const POLICY_FORMAT = 'cogr-embedded-policy';
/**
 * 3: item side only (the query side is the query planner): the query side's dense features
 * went, four query-side features for the item side came (qJudged, qRanked, qPrec,
 * fromQuery).
 */
export const POLICY_VERSION = 4;
/**
 * 4: the shared vocabulary (vocabulary.ts) the candidates are drawn from, or null for an open
 * one. Version 3 documents are read as version 4 with an open vocabulary (what they ran with).
 */
const READS = [3, 4];

export interface PolicyJSON {
  format: typeof POLICY_FORMAT;
  version: number;
  side: Side;
  config: PolicyConfig;
  dense: number[];
  stop: [number, number];
  sparse: [string, number][];
  stats: { n: number; df: [string, number][] } | null;
  vocabulary?: VocabularyJSON | null;
}

export function policyToJSON(
  side: Side,
  config: PolicyConfig,
  params: PolicyParams,
  stats: WordStats | null,
  vocabulary: Vocabulary | null,
): PolicyJSON {
  return {
    format: POLICY_FORMAT,
    version: POLICY_VERSION,
    side,
    config: { ...config },
    dense: Array.from(params.w.subarray(0, D)),
    stop: [params.w[STOP_B], params.w[STOP_A]],
    sparse: params.sparse(),
    stats: stats ? { n: stats.n, df: [...stats.df.entries()] } : null,
    vocabulary: vocabulary ? vocabulary.toJSON() : null,
  };
}

/** A policy document checked for its format, version and shape. */
export function checkPolicyJSON(json: unknown): PolicyJSON {
  const j = json as Partial<PolicyJSON> | null;
  if (!j || typeof j !== 'object' || j.format !== POLICY_FORMAT)
    throw cogrError('DATA_FORMAT', `not an embedded policy (format field is not "${POLICY_FORMAT}")`);
  if (!READS.includes(j.version as number))
    throw cogrError(
      'DB_VERSION',
      `embedded policy has format version ${String(j.version)}; this cogr reads versions ${READS.join(' and ')} only (retrain with cogr sft)`,
    );
  if (j.side !== 'item' || !Array.isArray(j.dense) || j.dense.length !== D || !Array.isArray(j.sparse) || !Array.isArray(j.stop))
    throw cogrError('DATA_FORMAT', 'embedded policy JSON is malformed (side "item", dense, stop or sparse)');
  return j as PolicyJSON;
}

/** Load a document's weights into fresh parameters. */
export function loadWeights(params: PolicyParams, j: PolicyJSON): void {
  params.w.set(j.dense, 0);
  params.w[STOP_B] = j.stop[0];
  params.w[STOP_A] = j.stop[1];
  for (const [k, v] of j.sparse) {
    // Number the feature first: it may grow (replace) the weight array.
    const id = params.featureId(k);
    params.w[id] = v;
  }
}

export function statsFromJSON(j: PolicyJSON): WordStats | null {
  return j.stats ? { n: j.stats.n, df: new Map(j.stats.df) } : null;
}
