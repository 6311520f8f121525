// Default addresses of the simulated cluster and the little address
// arithmetic the harness needs (allocation inside a CIDR, prefix lengths).
import { cidrContains, formatIP, parseCIDR, parseIP } from '../../src/model/ip.ts';
import type { Family } from '../../src/model/types.ts';

export interface DualStack {
  readonly v4: string;
  readonly v6: string;
}

/** The "outside the cluster" host, behind the first node: TEST-NET-3 and the documentation prefix. */
export const OUTSIDE: DualStack = { v4: '203.0.113.10', v6: '2001:db8::10' };
/** The first node's address on the outside link. */
export const OUTSIDE_GATEWAY: DualStack = { v4: '203.0.113.1', v6: '2001:db8::1' };
export const OUTSIDE_PREFIX = { v4: 24, v6: 64 } as const;

/** Routed style: every pod's default gateway, answered by a static neighbour entry (Calico's 169.254.1.1 and ee:ee:ee:ee:ee:ee). */
export const ROUTED_GATEWAY: DualStack = { v4: '169.254.1.1', v6: 'fe80::1' };
export const ROUTED_GATEWAY_MAC = 'ee:ee:ee:ee:ee:ee';

/** Node i (0-based): underlay address, the Node's InternalIP. */
export function defaultNodeAddresses(i: number): DualStack {
  return { v4: `172.18.0.${11 + i}`, v6: `fd00:172:18::${(11 + i).toString(16)}` };
}

/** Node i (0-based): pod CIDRs 10.244.<i+1>.0/24 and fd00:10:244:<i+1>::/64. */
export function defaultPodCIDRs(i: number): DualStack {
  return { v4: `10.244.${i + 1}.0/24`, v6: `fd00:10:244:${(i + 1).toString(16)}::/64` };
}

/** Service i (0-based): 10.96.0.10 + i and fd00:10:96::a + i. */
export function clusterIPs(i: number): DualStack {
  const v4 = parseIP('10.96.0.10');
  const v6 = parseIP('fd00:10:96::a');
  if (v4 === undefined || v6 === undefined) throw new Error('unreachable');
  return { v4: formatIP({ family: 4, value: v4.value + BigInt(i) }), v6: formatIP({ family: 6, value: v6.value + BigInt(i) }) };
}

export function familyOf(ip: string): Family {
  const p = parseIP(ip);
  if (p === undefined) throw new Error(`not an IP address: ${ip}`);
  return p.family;
}

export function prefixLength(cidr: string): number {
  const c = parseCIDR(cidr);
  if (!c.ok) throw new Error(`${cidr}: ${c.error}`);
  return c.cidr.prefix;
}

export function inCIDR(ip: string, cidr: string): boolean {
  const c = parseCIDR(cidr);
  const a = parseIP(ip);
  return c.ok && a !== undefined && cidrContains(c.cidr, a);
}

/** The n-th address of a CIDR (n = 1 is the first host address). */
export function nthAddress(cidr: string, n: number): string {
  const c = parseCIDR(cidr);
  if (!c.ok) throw new Error(`${cidr}: ${c.error}`);
  return formatIP({ family: c.cidr.family, value: c.cidr.base + BigInt(n) });
}

export function canonical(ip: string): string {
  const p = parseIP(ip);
  if (p === undefined) throw new Error(`not an IP address: ${ip}`);
  return formatIP(p);
}
