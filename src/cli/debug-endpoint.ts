// Where the node's debug endpoint is, for the commands that read it (denied,
// rules): --addr, else DEBUG_ADDR, else the agent's default; an agent
// listening on every address is reached on loopback.
import { formatListenAddr, parseListenAddr } from '../agent/config.ts';

/** `http://host:port` of the debug endpoint, or the usage error of a bad address. */
export function debugEndpointBase(
  addrFlag: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): { base: string } | { error: string } {
  const addrText =
    addrFlag ?? (env['DEBUG_ADDR'] === undefined || env['DEBUG_ADDR'] === '' ? '127.0.0.1:9743' : env['DEBUG_ADDR']);
  const addr = parseListenAddr(addrText);
  if (addr === undefined) return { error: `--addr must be host:port, not "${addrText}"` };
  const host = addr.host === '0.0.0.0' ? '127.0.0.1' : addr.host === '::' ? '::1' : addr.host;
  return { base: `http://${formatListenAddr({ host, port: addr.port })}` };
}
