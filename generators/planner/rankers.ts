/**
 * The served rankers (ranking.ts says what each does), in `--rank auto`'s tie order:
 * keywords first. Dependency-free, so the commands that parse `--rank` name them without
 * loading the planner.
 */
export const RANKERS = ['keywords', 'text', 'model', 'mix'] as const;
export type Ranker = (typeof RANKERS)[number];
