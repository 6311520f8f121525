// The deny path: the rules at the end of every pod chain, reached by a packet
// that no policy chain accepted. One home for what happens there, so that a
// change of the pod chains' shape carries it along unchanged:
//   1. with --log-denied: `limit name "denied-log" log prefix "nnp:<pod id>:IN"
//      group N snaplen 128` (the limit is one table object, so the rate is per
//      node, not per pod; over the limit the rule just does not match);
//   2. the counted verdict: `counter drop`, or for --deny-action reject a TCP
//      reset and ICMP(v6) port unreachable for the rest.
// The counters are what agent/denied/counters.ts exports as metrics; the log
// prefix is what agent/denied/log-line.ts maps back to the pod. A ClusterNetworkPolicy
// Deny rule's chain (tiers.ts) logs with the same rule, its own prefix.
import type { Direction, Pod } from '../model/types.ts';
import { objectKey } from '../model/types.ts';
import { DENY_LOG_LIMIT, denyLogPrefix, podId, sanitizeComment } from '../ruleset/ids.ts';
import type { NamedLimit, Rule } from '../ruleset/ir.ts';
import type { RenderOptions } from '../ruleset/options.ts';

/** Bytes of each logged packet sent to the NFLOG group: the IP and transport headers. */
export const DENY_LOG_SNAPLEN = 128;

/** With --log-denied: the log rule under the shared limit, with this prefix (also a tiered Deny rule's, tiers.ts). */
export function denyLogRule(prefix: string, o: RenderOptions): Rule[] {
  return o.logDenied === undefined
    ? []
    : [
        {
          matches: [{ kind: 'limit', name: DENY_LOG_LIMIT }],
          counter: false,
          verdict: { kind: 'log', group: o.logDenied.group, prefix, snaplen: DENY_LOG_SNAPLEN },
          comment: undefined,
        },
      ];
}

export function denyPathRules(pod: Pod, d: Direction, o: RenderOptions): Rule[] {
  const comment = sanitizeComment(`deny ${d} ${d === 'ingress' ? 'to' : 'from'} ${objectKey(pod)}`);
  const log = denyLogRule(denyLogPrefix(podId(pod.namespace, pod.name), d), o);
  if (o.denyAction === 'drop') return [...log, { matches: [], counter: true, verdict: { kind: 'drop' }, comment }];
  // TCP gets a reset (fast failure for clients); everything else ICMP(v6) port unreachable.
  return [
    ...log,
    { matches: [{ kind: 'l4proto', proto: 'tcp' }], counter: true, verdict: { kind: 'reject', with: 'tcp reset' }, comment },
    { matches: [], counter: true, verdict: { kind: 'reject', with: 'icmpx port-unreachable' }, comment },
  ];
}

/** The table's named limits: the deny path's log limit when logging is on. */
export function denyPathLimits(o: RenderOptions): NamedLimit[] {
  return o.logDenied === undefined
    ? []
    : [{ name: DENY_LOG_LIMIT, ratePerSecond: o.logDenied.ratePerSecond, burst: o.logDenied.burst }];
}
