/**
 * Test-only one-call forms of what production computes inside larger functions, kept
 * here so production exports only what production uses (npm run knip).
 */
import type { CogrDb } from '../../index/store/db.ts';
import type { F1Point } from '../../src/drift/analyze.ts';
import { DEFAULT_DIFF_LIMIT, diffPrepared, prepareSnapshot, type GenerationSnapshot, type KeywordDiff } from '../../src/drift/analyze.ts';
import { f1Points, RunState } from '../../src/run/state.ts';
import { evaluate, WorkMeter, type ProgramContext, type ProgramNode } from '../../src/server/program.ts';

/** Diff between any two generations of one side. */
export function diffSnapshots(from: GenerationSnapshot, to: GenerationSnapshot, limit = DEFAULT_DIFF_LIMIT): KeywordDiff {
  return diffPrepared(prepareSnapshot(from), prepareSnapshot(to), limit);
}

/** Cosine of two vectors. */
export function cosine(a: Float32Array, b: Float32Array): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let j = 0; j < a.length; j++) {
    ab += a[j] * b[j];
    aa += a[j] * a[j];
    bb += b[j] * b[j];
  }
  return aa > 0 && bb > 0 ? ab / Math.sqrt(aa * bb) : 0;
}

/** The F1 points of the run stored in a database (empty when it holds no run). */
export async function storedF1Points(db: CogrDb): Promise<F1Point[]> {
  return f1Points(await new RunState(db).steps());
}

/** The matched set of a validated program, as sorted ordinals (cooperative and capped: WorkMeter). */
export async function evaluateProgram(
  node: ProgramNode,
  ctx: ProgramContext,
  meter: WorkMeter = new WorkMeter(),
  path = 'program',
): Promise<Int32Array> {
  return evaluate(node, { ...ctx, probes: new Map() }, meter, path);
}
