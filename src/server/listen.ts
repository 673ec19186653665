/**
 * Running a server from the command line: listen, log the address, close cleanly on SIGINT/SIGTERM
 * (and, with `parentPid`, once that process is no longer this one's parent: a server started for
 * one command goes with it, even when the command was killed).
 */
import type { FastifyInstance } from 'fastify';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';

function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || host.startsWith('127.');
}

export async function listenUntilSignal(
  app: FastifyInstance,
  host: string,
  port: number,
  what: string,
  log: Logger,
  onClose?: () => void,
  opts: { docs?: boolean; onListening?: (address: string) => void; parentPid?: number } = {},
): Promise<void> {
  if (!isLoopback(host)) log.warn(`${what} listens on ${host}, reachable from other machines; set --token for the protected endpoints`);
  let address: string;
  try {
    address = await app.listen({ host, port });
  } catch (e) {
    // One line, not a stack: the address is taken, not allowed or not on this machine.
    const code = (e as { code?: string }).code;
    onClose?.();
    await app.close().catch(() => {});
    const why: Record<string, string> = {
      EADDRINUSE:
        'the address is already in use (another server runs there: stop it, or choose another --port; --port 0 takes any free one)',
      EACCES: 'the port is not allowed for this user (ports below 1024 need privileges: choose another --port)',
      EADDRNOTAVAIL: "the address is not one of this machine's (check --host)",
      ENOTFOUND: 'the host name cannot be resolved (check --host)',
    };
    if (code !== undefined && code in why) {
      throw cogrError('ADDRESS_UNAVAILABLE', `${what} cannot listen on ${host}:${port}: ${why[code]}`, { host, port, reason: code }, e);
    }
    throw e;
  }
  log.info(`${what} listening`, opts.docs === false ? { address } : { address, docs: `${address}/docs` });
  opts.onListening?.(address);
  await new Promise<void>((resolve) => {
    let watch: NodeJS.Timeout | undefined;
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      if (watch) clearInterval(watch);
      onClose?.();
      void app.close().then(
        () => resolve(),
        () => resolve(),
      );
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    const parent = opts.parentPid;
    if (parent !== undefined) watch = setInterval(() => process.ppid !== parent && stop(), 1000);
  });
}
