// Scratch network namespaces for nft tests that need a real kernel: created
// with unique names, always removed (finally), plus a listing canonicalizer
// and a tiny TCP probe. Self-contained: the datapath harness has its own.
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';

/** Runs `fn` with `count` fresh network namespaces, deleted afterwards whatever happens. */
export async function withNetns<T>(count: number, fn: (names: string[]) => Promise<T>): Promise<T> {
  const id = randomBytes(4).toString('hex');
  const names: string[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const name = `nftnp-t-${id}-${i}`;
      await execa('ip', ['netns', 'add', name]);
      names.push(name);
    }
    return await fn(names);
  } finally {
    for (const n of names) await execa('ip', ['netns', 'del', n], { reject: false });
  }
}

/** Runs a command inside a namespace; throws with stderr on failure. */
export async function inNetns(netns: string, cmd: string, args: readonly string[]): Promise<string> {
  const r = await execa('ip', ['netns', 'exec', netns, cmd, ...args], { reject: false });
  if (r.failed) throw new Error(`${cmd} ${args.join(' ')} in ${netns}: ${r.stderr || r.message}`);
  return r.stdout;
}

/**
 * A table listing with what may legitimately differ between two kernels
 * holding the same ruleset removed: counter values, and the order of the
 * elements of hash sets and maps (the kernel lists those in the order of a
 * per-set random hash seed). Interval sets list sorted anyway.
 */
export function canonicalListing(listing: string): string {
  const text = listing.replace(/counter packets \d+ bytes \d+/g, 'counter');
  return text.replace(/elements = \{([^}]*)\}/g, (_m, inner: string) => {
    const elements = inner
      .split(',')
      .map((e) => e.trim())
      .filter((e) => e !== '')
      .sort();
    return `elements = { ${elements.join(', ')} }`;
  });
}

export type ProbeResult = 'connected' | 'refused' | 'timeout' | 'error';

// Node as the TCP client: it can pick the source address (a pod among several on one interface).
const PROBE = `
const net = require('node:net');
const [host, port, local, ms] = process.argv.slice(1);
const s = net.connect({ host, port: Number(port), ...(local ? { localAddress: local } : {}) });
const done = (r) => { process.stdout.write(r); s.destroy(); process.exit(0); };
s.setTimeout(Number(ms), () => done('timeout'));
s.on('connect', () => done('connected'));
s.on('error', (e) => done(e.code === 'ECONNREFUSED' ? 'refused' : 'error:' + e.code));
`;

/**
 * Opens a TCP connection from `netns`. `refused` (an RST came back from a
 * closed port) proves the SYN got through as well as `connected` does;
 * `timeout` means it was dropped on the way.
 */
export async function tcpProbe(
  netns: string,
  host: string,
  port: number,
  localAddress = '',
  timeoutMs = 1500,
): Promise<ProbeResult> {
  const out = await inNetns(netns, process.execPath, ['-e', PROBE, host, String(port), localAddress, String(timeoutMs)]);
  return out === 'connected' || out === 'refused' || out === 'timeout' ? out : 'error';
}
