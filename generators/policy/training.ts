/**
 * Training of the embedded policy: ascent on Σ log p (SFT, maximum likelihood on ordered
 * targets) or on the GRPO clipped surrogate with group-normalised advantages and an
 * optional k3 KL estimate to a reference policy; Adagrad steps with a small L2 on the
 * touched weights (params.ts).
 */
import { normalizeKeyword } from '../../index/text/normalize.ts';
import { createRng, shuffle } from '../../index/core/random.ts';
import type { GenerateInput } from '../types.ts';
import { SPARSE0, sequenceOf, type CandidateSet, type PolicyConfig, type PolicyParams } from './params.ts';
import { sequenceLogProb } from './sampling.ts';
import { DI, QUERY_SIDE_FEATURES } from './candidates.ts';

/** Dense indices of the query-side features (trainable with grpoParams 'sparse+query'). */
const QUERY_SIDE_INDICES: ReadonlySet<number> = new Set(QUERY_SIDE_FEATURES.map((n) => DI[n]));

export interface SftExample {
  input: GenerateInput;
  target: string[];
}
export interface SftOptions {
  epochs?: number;
  lr?: number;
  seed?: number;
  batchSize?: number;
}
export interface SftReport {
  /** Mean negative log-likelihood per example, per epoch. */
  epochLoss: number[];
  /** Share of target keywords found among the candidates. */
  coverage: number;
}

export interface GrpoSample {
  input: GenerateInput;
  keywords: string[];
  oldLogProb: number;
  advantage: number;
}
export interface GrpoOptions {
  clip?: number;
  klCoef?: number;
  /** The KL reference (e.g. the SFT policy): anything that gives log-probabilities. */
  reference?: { logProb(input: GenerateInput, keywords: readonly string[], temperature?: number): number };
  lr?: number;
  temperature?: number;
  /** Gradient steps over the batch (the first is on-policy when oldLogProb is current). */
  steps?: number;
}
export interface GrpoStats {
  objective: number;
  meanRatio: number;
  clipFraction: number;
  kl: number;
  skipped: number;
}

/** What training needs of a policy: its parameters, settings and candidate sets. */
export interface Trainable {
  readonly params: PolicyParams;
  readonly config: PolicyConfig;
  candidateSet(input: GenerateInput): CandidateSet;
}

/** Maximum likelihood on ordered targets (targets outside the candidates are dropped). */
export function trainSft(p: Trainable, examples: readonly SftExample[], opts: SftOptions = {}): SftReport {
  const { params, config } = p;
  const epochs = opts.epochs ?? 5;
  const lr = opts.lr ?? 0.1;
  const bs = opts.batchSize ?? 16;
  const rng = createRng(opts.seed ?? 0);
  let total = 0;
  let found = 0;
  const prepared: { cs: CandidateSet; seq: number[] }[] = [];
  for (const ex of examples) {
    const cs = p.candidateSet(ex.input);
    const seq: number[] = [];
    const seen = new Set<number>();
    for (const raw of ex.target) {
      total++;
      const k = normalizeKeyword(raw);
      const c = k === null ? undefined : cs.index.get(k);
      if (c === undefined || seen.has(c)) continue;
      found++;
      seen.add(c);
      if (seq.length < config.kMax) seq.push(c);
    }
    prepared.push({ cs, seq });
  }
  const epochLoss: number[] = [];
  for (let e = 0; e < epochs; e++) {
    let loss = 0;
    const order = shuffle(
      prepared.map((_, i) => i),
      rng,
    );
    for (let b = 0; b < order.length; b += bs) {
      const batch = order.slice(b, b + bs);
      for (const i of batch) {
        const { cs, seq } = prepared[i];
        loss -= sequenceLogProb(params, cs, seq, 1, config.kMax, true, 1 / batch.length);
      }
      params.step(lr, config.l2);
    }
    epochLoss.push(prepared.length ? loss / prepared.length : 0);
  }
  return { epochLoss, coverage: total ? found / total : 1 };
}

/**
 * One GRPO update: maximise mean_i [min(ρ_i A_i, clip(ρ_i, 1−ε, 1+ε) A_i) − β·KL_i],
 * ρ_i = exp(log p_new − oldLogProb), KL_i the k3 estimate exp(r−l) − (r−l) − 1 with r the
 * reference log-probability. Samples with a non-finite log-probability are skipped.
 */
export function grpoUpdate(p: Trainable, batch: readonly GrpoSample[], opts: GrpoOptions = {}): GrpoStats {
  const { params, config } = p;
  const eps = opts.clip ?? 0.2;
  const beta = opts.klCoef ?? 0;
  const lr = opts.lr ?? 0.05;
  const T = opts.temperature ?? 1;
  const steps = opts.steps ?? 1;
  const kMax = config.kMax;
  const prepared = batch.map((b) => {
    const cs = p.candidateSet(b.input);
    const seq = sequenceOf(cs, b.keywords);
    const ref = beta > 0 && opts.reference ? opts.reference.logProb(b.input, b.keywords, T) : null;
    return { b, cs, seq, ref };
  });
  const stats: GrpoStats = { objective: 0, meanRatio: 0, clipFraction: 0, kl: 0, skipped: 0 };
  params.gradFrom = config.grpoParams === 'all' ? 0 : config.grpoParams === 'query' ? Number.MAX_SAFE_INTEGER : SPARSE0;
  params.alsoTrain = config.grpoParams === 'sparse+query' || config.grpoParams === 'query' ? QUERY_SIDE_INDICES : new Set();
  try {
    for (let it = 0; it < steps; it++) {
      let obj = 0;
      let ratioSum = 0;
      let clipped = 0;
      let kl = 0;
      let used = 0;
      let skipped = 0;
      for (const x of prepared) {
        if (x.seq === null || !Number.isFinite(x.b.oldLogProb)) {
          skipped++;
          continue;
        }
        const l = sequenceLogProb(params, x.cs, x.seq, T, kMax);
        const ratio = Math.exp(l - x.b.oldLogProb);
        const A = x.b.advantage;
        const clippedRatio = Math.min(Math.max(ratio, 1 - eps), 1 + eps);
        const isClipped = A * clippedRatio < A * ratio;
        let coef = isClipped ? 0 : A * ratio;
        obj += Math.min(ratio * A, clippedRatio * A);
        if (isClipped) clipped++;
        if (beta > 0 && x.ref !== null && Number.isFinite(x.ref)) {
          const d = x.ref - l;
          kl += Math.exp(d) - d - 1;
          coef += beta * (Math.exp(d) - 1);
        }
        ratioSum += ratio;
        used++;
        if (coef !== 0) sequenceLogProb(params, x.cs, x.seq, T, kMax, true, coef / batch.length);
      }
      params.step(lr, config.l2, params.gradFrom);
      if (it === 0) {
        const u = Math.max(1, used);
        Object.assign(stats, { objective: obj / u, meanRatio: ratioSum / u, clipFraction: clipped / u, kl: kl / u, skipped });
      }
    }
  } finally {
    params.gradFrom = 0;
    params.alsoTrain = new Set();
  }
  return stats;
}
