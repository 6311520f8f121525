// What one compiled allow rule means, as values: the typed twin of each nft
// rule of a KUBE-NWPLCY chain (policy-rules.ts). The flattening into peer
// identities (identities.ts) reads these, never the nft rules or set
// elements, so the per-policy form and the flat form share their meaning
// without a round trip through text.
import type { Interval } from '../model/ip.ts';
import type { Direction, Family, Peer } from '../model/types.ts';
import type { ReadonlyList } from '../model/list.ts';
import type { CountedRule } from '../ruleset/ir.ts';
import type { PortRange, PortTriple } from './ports.ts';

/** Where a rule's remote side may be. */
export type TermSource =
  /** Pod addresses only (a hash set): pod identities. `key` names the shared set. */
  | { readonly kind: 'pods'; readonly key: string; readonly about: string; readonly addrs: ReadonlyList<string> }
  /** Address ranges (ipBlocks, pods of rules mixing pods and ipBlocks): range identities. */
  | { readonly kind: 'ranges'; readonly key: string; readonly about: string; readonly ivs: readonly Interval[] }
  /** No peers: every address (a range identity). */
  | { readonly kind: 'anywhere' }
  /** Egress named ports: destination pods, with the ports each serves. */
  | { readonly kind: 'named'; readonly key: string; readonly about: string; readonly triples: readonly PortTriple[] };

/** What a rule allows on the local side. */
export type TermPorts =
  | { readonly kind: 'all' }
  /** Port intervals (numeric ports, any local pod of the policy). */
  | { readonly kind: 'numeric'; readonly ranges: readonly PortRange[] }
  /** Ingress named ports: resolved on the local pods. */
  | { readonly kind: 'local'; readonly triples: readonly PortTriple[] }
  /** Egress named ports: the ports come with the remote address (source `named`). */
  | { readonly kind: 'remote' };

/** The pods a source's addresses come from: those its rule's pod peers select (peers undefined: every pod). */
export interface PodFollow {
  readonly peers: readonly Peer[] | undefined;
  /** The policy's namespace (pod peers without a namespaceSelector). */
  readonly namespace: string;
}

/** The policy rule a term comes from: its counting chain (identities.ts makes it). */
export interface TermRule {
  /** KUBE-NWPLCY-<policy>-<IN|EG>-<index>: `counter accept`, the goto target of what this rule is first to allow. */
  readonly chain: string;
  readonly counts: CountedRule;
  /** The rule's description (its origin's), the chain's rule comment. */
  readonly description: string;
}

export interface Term {
  /** `ns/name ingress[0]`: shown on the allow elements. */
  readonly label: string;
  /** Shared by the terms of one rule. */
  readonly rule: TermRule;
  readonly direction: Direction;
  /** undefined: both families. */
  readonly family: Family | undefined;
  readonly source: TermSource;
  readonly ports: TermPorts;
  /** Local addresses of the pods the policy isolates, per family. */
  readonly targets: ReadonlyMap<Family, readonly string[]>;
  /** Set when the source follows pods (pod peers, egress named ports): which pod changes can touch it (peer-churn.ts). */
  readonly follows?: PodFollow;
}
