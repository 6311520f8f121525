// Raw Kubernetes objects as YAML/JSON would give them, typed just enough for
// the case data to be written without casts. Nothing here is validated: the
// normalizer (src/model/normalize.ts) is what turns these into the model.
import type { Protocol } from '../../src/model/types.ts';

export interface RawObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec?: unknown;
  readonly status?: unknown;
}

export interface RawSelector {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly { readonly key: string; readonly operator: string; readonly values?: readonly string[] }[];
}

export interface RawPeer {
  readonly podSelector?: RawSelector;
  readonly namespaceSelector?: RawSelector;
  readonly ipBlock?: { readonly cidr: string; readonly except?: readonly string[] };
}

export interface RawPort {
  readonly protocol?: Protocol;
  readonly port?: number | string;
  readonly endPort?: number;
}

export interface RawIngressRule {
  readonly from?: readonly RawPeer[];
  readonly ports?: readonly RawPort[];
}

export interface RawEgressRule {
  readonly to?: readonly RawPeer[];
  readonly ports?: readonly RawPort[];
}

export interface RawPolicySpec {
  readonly podSelector: RawSelector;
  readonly policyTypes?: readonly ('Ingress' | 'Egress')[];
  readonly ingress?: readonly RawIngressRule[];
  readonly egress?: readonly RawEgressRule[];
}

/** A NetworkPolicy with the spec exactly as given (no defaults filled in). */
export function networkPolicy(namespace: string, name: string, spec: RawPolicySpec): RawObject {
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace }, spec };
}
