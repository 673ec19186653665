/**
 * The corpus of a stored run: its dataset loaded in the format the run recorded (a
 * folder that several loaders could read is read the way the run read it).
 */
import type { Logger } from '../../index/core/log.ts';
import { loadDataset, parseFormat, type LoadedDataset } from '../datasets/index.ts';
import type { RunConfig } from './config.ts';

export async function loadRunCorpus(config: Pick<RunConfig, 'dataset' | 'format'>, logger?: Logger): Promise<LoadedDataset> {
  const format = parseFormat(config.format);
  return loadDataset(config.dataset, { ...(format ? { format } : {}), ...(logger ? { logger } : {}) });
}
