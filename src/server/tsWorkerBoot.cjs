// Boots a TypeScript worker entry (tests run the sources): tsx's hooks, loaded through
// the worker's --import, transpile it when it is required from a CommonJS file like this
// one (they do not apply to a .ts main module or an eval'd worker on Node 20). The
// compiled build starts its JavaScript entries directly and never uses this file.
require(require('node:worker_threads').workerData.cogrWorkerEntry);
