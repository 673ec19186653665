/**
 * The query planner as JSON (saved per round by src/run/policies.ts): its configuration,
 * its own parameters and its relevance model (weights and training judgements; the items'
 * texts rebuild the rest). The document carries its format name and version; another
 * version is refused with DB_VERSION, never misread.
 */
import { cogrError } from '../../index/core/errors.ts';
import type { PlannerConfig } from './config.ts';
import type { PlannerParams } from './params.ts';

export const PLANNER_FORMAT = 'cogr-query-planner';
export const PLANNER_VERSION = 1;

/** A saved planner: its configuration, parameters and its relevance model (weights and training judgements). */
export interface PlannerJSON {
  format: typeof PLANNER_FORMAT;
  version: number;
  config: PlannerConfig;
  params: PlannerJSONParams;
  relevance: unknown;
}

export interface PlannerJSONParams {
  alpha: number;
  stopBias: number;
  terms: [string, number][];
}

export function plannerToJSON(config: PlannerConfig, params: PlannerParams, relevance: unknown): PlannerJSON {
  return {
    format: PLANNER_FORMAT,
    version: PLANNER_VERSION,
    config: { ...config },
    params: {
      alpha: params.alpha,
      stopBias: params.stopBias,
      terms: [...params.terms.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)),
    },
    relevance,
  };
}

/** A saved planner document checked for its format, version and parts (the relevance model is read by relevance.ts). */
export function readPlannerJSON(json: unknown): PlannerJSON {
  const j = json as Partial<PlannerJSON> | null;
  if (!j || typeof j !== 'object' || j.format !== PLANNER_FORMAT)
    throw cogrError('DATA_FORMAT', `not a query planner (format field is not "${PLANNER_FORMAT}")`);
  if (j.version !== PLANNER_VERSION)
    throw cogrError(
      'DB_VERSION',
      `query planner has format version ${String(j.version)}; this cogr reads version ${PLANNER_VERSION} only (rerun the co-evolution run)`,
    );
  if (!j.config || !j.params) throw cogrError('DATA_FORMAT', 'query planner JSON is malformed (config, params)');
  return j as PlannerJSON;
}

/** Set a planner's parameters from their JSON. */
export function setParams(params: PlannerParams, p: PlannerJSONParams): void {
  if (!(p.alpha > 0) || !Number.isFinite(p.stopBias) || !Array.isArray(p.terms))
    throw cogrError('DATA_FORMAT', 'planner parameters are malformed (alpha, stopBias, terms)');
  params.alpha = p.alpha;
  params.stopBias = p.stopBias;
  params.terms.clear();
  for (const [k, v] of p.terms) params.terms.set(k, v);
}
