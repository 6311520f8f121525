// The tenancy kinds -> normalized model (see docs/tenancy.md):
//   tenant.kubesphere.io Workspace (v1alpha1; v1alpha2 WorkspaceTemplate shape too),
//   network.kubesphere.io/v1alpha1 NamespaceNetworkPolicy,
//   v1 Service (only what service peers use: selector and ports).
// Validation follows normalize-policy.ts: field paths as the API server
// prints them, and a bad rule allows nothing.
import { ANY, listOf, object, objectFields, openObject } from './field-tree.ts';
import { dns1123LabelErrors, isPortNumber, PORT_RANGE_MESSAGE, portNameErrors } from './k8s-names.ts';
import {
  field,
  isRecord,
  listField,
  normalizeLabels,
  objectVersion,
  readHead,
  requiredString,
  isObjectAt,
  show,
  subObject,
} from './normalize-common.ts';
import type { Normalized, Report } from './normalize-common.ts';
import {
  IP_BLOCK_FIELDS,
  normalizeIPBlock,
  normalizePort,
  POLICY_PORT_FIELDS,
  policySpec,
  policyTypes,
} from './normalize-policy.ts';
import { PROTOCOLS } from './types.ts';
import type {
  NamespaceNetworkPolicy,
  NamespacePolicyPeer,
  NamespacePolicyRule,
  PortSpec,
  Protocol,
  Service,
  ServicePort,
  Workspace,
} from './types.ts';

export const WORKSPACE_GROUP = 'tenant.kubesphere.io';
export const WORKSPACE_API_VERSIONS = [`${WORKSPACE_GROUP}/v1alpha1`, `${WORKSPACE_GROUP}/v1alpha2`] as const;
export const NSNP_API_VERSION = 'network.kubesphere.io/v1alpha1';
/** The namespace label that puts a namespace ("project") into a workspace. */
export const WORKSPACE_LABEL = 'kubesphere.io/workspace';

const WORKSPACE_SPEC = { manager: ANY, networkIsolation: ANY };

/**
 * Workspace and WorkspaceTemplate fields (strict field checks, field-tree.ts):
 * the v1alpha1 spec, inline or under the federated template, whose placement
 * and overrides are not read here.
 */
export const WORKSPACE_FIELDS = objectFields({
  spec: object({
    ...WORKSPACE_SPEC,
    template: object({ metadata: ANY, spec: object(WORKSPACE_SPEC) }),
    placement: ANY,
    overrides: ANY,
  }),
  status: ANY,
});

const NSNP_PEER_FIELDS = object({
  namespace: object({ name: ANY }),
  ipBlock: IP_BLOCK_FIELDS,
  service: object({ name: ANY, namespace: ANY }),
});

/** NamespaceNetworkPolicy fields, as its CRD (daemonset/tenancy/) and KubeSphere's define them. */
export const NAMESPACE_POLICY_FIELDS = objectFields({
  spec: object({
    policyTypes: ANY,
    ingress: listOf(object({ from: listOf(NSNP_PEER_FIELDS), ports: listOf(POLICY_PORT_FIELDS) })),
    egress: listOf(object({ to: listOf(NSNP_PEER_FIELDS), ports: listOf(POLICY_PORT_FIELDS) })),
  }),
  status: ANY,
});

/**
 * v1 Service: only the ports' fields are checked (a target port misspelled
 * there changes what a service peer allows); the rest of the spec is open.
 */
export const SERVICE_FIELDS = objectFields({
  spec: openObject({
    selector: ANY,
    ports: listOf(object({ name: ANY, protocol: ANY, appProtocol: ANY, port: ANY, targetPort: ANY, nodePort: ANY })),
  }),
  status: ANY,
});

/**
 * Workspace (v1alpha1, spec.networkIsolation) or the v1alpha2 shapes: a
 * WorkspaceTemplate with the v1alpha1 spec inline, or with it under
 * spec.template.spec (the federated template). An unreadable
 * networkIsolation is reported and read as true: isolation is the closed side.
 */
export function normalizeWorkspace(obj: unknown): Normalized<Workspace> {
  const rawKind = isRecord(obj) ? field(obj, 'kind') : undefined;
  const kind = rawKind === 'WorkspaceTemplate' ? 'WorkspaceTemplate' : 'Workspace';
  const av = isRecord(obj) ? field(obj, 'apiVersion') : undefined;
  const apiVersion =
    WORKSPACE_API_VERSIONS.find((v) => v === av) ??
    (kind === 'Workspace' ? WORKSPACE_API_VERSIONS[0] : WORKSPACE_API_VERSIONS[1]);
  const h = readHead(obj, kind, false, apiVersion);
  if (!h.ok) return h;
  const { name, sink } = h.head;
  const spec = subObject(h.head.obj, 'spec', 'spec', sink.report);
  let path = 'spec.networkIsolation';
  let v = field(spec, 'networkIsolation');
  const template = field(spec, 'template');
  if (v === undefined && isRecord(template)) {
    const ts = field(template, 'spec');
    if (isRecord(ts)) {
      v = field(ts, 'networkIsolation');
      path = 'spec.template.spec.networkIsolation';
    }
  }
  if (v !== undefined && typeof v !== 'boolean') sink.report(path, `must be a boolean, not ${show(v)}`);
  const version = objectVersion(h.head.metadata);
  const value: Workspace = {
    name,
    networkIsolation: v === undefined ? false : v !== false,
    ...(version === undefined ? {} : { version }),
    ...(sink.errors.length === 0 ? {} : { errors: [...sink.errors] }),
  };
  return { ok: true, value, errors: sink.errors };
}

/** v1 Service: selector and ports (targetPort defaulted to port, as the API server does). */
export function normalizeService(obj: unknown): Normalized<Service> {
  const h = readHead(obj, 'Service', true, 'v1');
  if (!h.ok) return h;
  const { name, sink } = h.head;
  const namespace = h.head.namespace ?? 'default';
  const { report } = sink;
  const spec = subObject(h.head.obj, 'spec', 'spec', report);
  const sel = normalizeLabels(field(spec, 'selector'), 'spec.selector', report);
  // An invalid selector selects nothing here (fail closed): a service peer then allows nothing.
  const selector = sel.valid && Object.keys(sel.labels).length > 0 ? sel.labels : undefined;
  const ports: ServicePort[] = [];
  (listField(spec, ['ports'], 'spec.ports', report) ?? []).forEach((raw, i) => {
    const p = normalizeServicePort(raw, `spec.ports[${i}]`, report);
    if (p !== undefined) ports.push(p);
  });
  return { ok: true, value: { namespace, name, selector, ports }, errors: sink.errors };
}

function normalizeServicePort(raw: unknown, path: string, report: Report): ServicePort | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  const protoRaw = field(raw, 'protocol');
  const protocol: Protocol | undefined = protoRaw === undefined ? 'TCP' : PROTOCOLS.find((p) => p === protoRaw);
  if (protocol === undefined) {
    report(`${path}.protocol`, `Unsupported value: ${show(protoRaw)}: supported values: "TCP", "UDP", "SCTP"`);
    return undefined;
  }
  const port = field(raw, 'port');
  if (!isPortNumber(port)) {
    report(`${path}.port`, port === undefined ? 'Required value' : `${PORT_RANGE_MESSAGE} (got ${show(port)})`);
    return undefined;
  }
  const nameRaw = field(raw, 'name');
  const name = typeof nameRaw === 'string' && nameRaw !== '' ? nameRaw : undefined;
  // IntOrString; client-node models give a number or a string. A numeric string is a number on the wire.
  const tp = field(raw, 'targetPort');
  let targetPort: number | string = port;
  if (typeof tp === 'number') {
    if (!isPortNumber(tp)) {
      report(`${path}.targetPort`, `${PORT_RANGE_MESSAGE} (got ${tp})`);
      return undefined;
    }
    targetPort = tp;
  } else if (typeof tp === 'string' && tp !== '') {
    if (/^\d+$/.test(tp)) {
      const n = Number(tp);
      if (!isPortNumber(n)) {
        report(`${path}.targetPort`, `${PORT_RANGE_MESSAGE} (got ${tp})`);
        return undefined;
      }
      targetPort = n;
    } else {
      const errs = portNameErrors(tp);
      for (const m of errs) report(`${path}.targetPort`, `invalid port name ${show(tp)}: ${m}`);
      if (errs.length > 0) return undefined;
      targetPort = tp;
    }
  } else if (tp !== undefined && tp !== '') {
    report(`${path}.targetPort`, `must be a port number or name, not ${show(tp)}`);
    return undefined;
  }
  return { name, protocol, port, targetPort };
}

function invalidRule(): NamespacePolicyRule {
  return { peers: [], ports: [], invalid: true };
}

/**
 * NamespaceNetworkPolicy: NetworkPolicy rules (ports with endPort, policyTypes
 * with the same defaults) whose peers are `namespace: {name}`, `ipBlock` or
 * `service: {name, namespace}`, exactly one per peer.
 */
export function normalizeNamespacePolicy(obj: unknown): Normalized<NamespaceNetworkPolicy> {
  const h = readHead(obj, 'NamespaceNetworkPolicy', true, NSNP_API_VERSION);
  if (!h.ok) return h;
  const { name, sink } = h.head;
  const namespace = h.head.namespace ?? 'default';
  const { report, errors } = sink;
  const version = objectVersion(h.head.metadata);
  const v = version === undefined ? {} : { version };
  const failClosed = (): Normalized<NamespaceNetworkPolicy> => ({
    ok: true,
    value: { namespace, name, types: { ingress: true, egress: true }, ingress: [], egress: [], errors, ...v },
    errors,
  });
  const shape = policySpec(h.head.obj, report);
  if (shape === undefined) return failClosed();
  const { ingressRaw, egressRaw, typesRaw } = shape;
  const t = policyTypes(typesRaw, egressRaw, report);
  const rules = (raw: readonly unknown[] | undefined, path: string, peerField: string): NamespacePolicyRule[] =>
    (raw ?? []).map((r, i) => normalizeRule(r, `${path}[${i}]`, peerField, namespace, report));
  const ingress = rules(ingressRaw, 'spec.ingress', 'from');
  const egress = rules(egressRaw, 'spec.egress', 'to');
  return {
    ok: true,
    value: {
      namespace,
      name,
      types: t.types,
      ingress: t.types.ingress && t.ingressListed ? ingress : [],
      egress: t.types.egress && t.egressListed ? egress : [],
      errors,
      ...v,
    },
    errors,
  };
}

function normalizeRule(raw: unknown, path: string, peerField: string, policyNs: string, outer: Report): NamespacePolicyRule {
  let invalid = false;
  const report: Report = (p, m) => {
    invalid = true;
    outer(p, m);
  };
  if (!isObjectAt(raw, path, report)) return invalidRule();
  const portsRaw = listField(raw, ['ports'], `${path}.ports`, report);
  const peersRaw = listField(raw, peerField === 'from' ? ['from', '_from'] : ['to'], `${path}.${peerField}`, report);
  const ports: PortSpec[] = [];
  (portsRaw ?? []).forEach((p, i) => {
    const ps = normalizePort(p, `${path}.ports[${i}]`, report);
    if (ps !== undefined) ports.push(ps);
  });
  const peers: NamespacePolicyPeer[] = [];
  (peersRaw ?? []).forEach((p, i) => {
    const pe = normalizePeer(p, `${path}.${peerField}[${i}]`, policyNs, report);
    if (pe !== undefined) peers.push(pe);
  });
  if (invalid) return invalidRule();
  return { peers: peers.length === 0 ? undefined : peers, ports: ports.length === 0 ? undefined : ports, invalid: false };
}

function normalizePeer(raw: unknown, path: string, policyNs: string, report: Report): NamespacePolicyPeer | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  const nsRaw = field(raw, 'namespace');
  const ibRaw = field(raw, 'ipBlock');
  const svcRaw = field(raw, 'service');
  const count = [nsRaw, ibRaw, svcRaw].filter((x) => x !== undefined).length;
  if (count === 0) {
    report(path, 'must specify a peer (namespace, ipBlock or service)');
    return undefined;
  }
  if (count > 1) {
    report(path, 'may not specify more than one of namespace, ipBlock and service');
    return undefined;
  }
  if (ibRaw !== undefined) {
    const b = normalizeIPBlock(ibRaw, `${path}.ipBlock`, report);
    return b?.kind === 'ipBlock' ? { kind: 'ipBlock', cidr: b.cidr, except: b.except } : undefined;
  }
  if (nsRaw !== undefined) {
    const name = requiredName(nsRaw, `${path}.namespace`, report);
    return name === undefined ? undefined : { kind: 'namespace', name };
  }
  const svc = svcRaw;
  if (!isObjectAt(svc, `${path}.service`, report)) return undefined;
  const name = requiredName(svc, `${path}.service`, report);
  // KubeSphere requires the namespace; an absent one means the policy's own (what a user means).
  const nsField = field(svc, 'namespace');
  let namespace = policyNs;
  if (nsField !== undefined && nsField !== '') {
    if (typeof nsField !== 'string') {
      report(`${path}.service.namespace`, `must be a string, not ${show(nsField)}`);
      return undefined;
    }
    const errs = dns1123LabelErrors(nsField);
    for (const m of errs) report(`${path}.service.namespace`, m);
    if (errs.length > 0) return undefined;
    namespace = nsField;
  }
  return name === undefined ? undefined : { kind: 'service', namespace, name };
}

/** `{name: ...}` with a DNS label as name (namespace and service names are both DNS labels). */
function requiredName(raw: unknown, path: string, report: Report): string | undefined {
  const name = isObjectAt(raw, path, report) ? requiredString(raw, 'name', `${path}.name`, report) : undefined;
  if (name === undefined) return undefined;
  const errs = dns1123LabelErrors(name);
  for (const m of errs) report(`${path}.name`, m);
  return errs.length > 0 ? undefined : name;
}
