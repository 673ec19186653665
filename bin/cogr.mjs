#!/usr/bin/env node
// Entry point of the `cogr` command. The sources are TypeScript run through tsx's
// loader, so the same files serve the CLI, the tests and the worker threads.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
await main(process.argv);
