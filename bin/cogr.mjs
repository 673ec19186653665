#!/usr/bin/env node
// Entry point of the `cogr` command: the compiled CLI in dist/ (`npm run build`, which
// `npm ci` runs through the `prepare` script). Stack traces name the TypeScript sources
// through the emitted source maps.
process.setSourceMapsEnabled(true);
let cli;
try {
  cli = await import('../dist/src/cli.js');
} catch (e) {
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' || !String(e.message).includes('dist')) throw e;
  process.stderr.write('error: cogr is not built (dist/ is missing): run `npm run build` (npm ci does it through `prepare`)\n');
  process.exit(1);
}
await cli.main(process.argv);
