/** Running a server from the command line: listen, log the address, close cleanly on SIGINT/SIGTERM. */
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../../index/log.ts';

function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || host.startsWith('127.');
}

export async function listenUntilSignal(app: FastifyInstance, host: string, port: number, what: string, log: Logger, onClose?: () => void): Promise<void> {
  if (!isLoopback(host)) log.warn(`${what} listens on ${host}, reachable from other machines; set --token for the protected endpoints`);
  const address = await app.listen({ host, port });
  log.info(`${what} listening`, { address, docs: `${address}/docs` });
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      onClose?.();
      void app.close().then(() => resolve());
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
