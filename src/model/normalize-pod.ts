// Pod (v1) -> normalized Pod: labels, placement, IPs and named container ports.
//
// A node may cache 100k+ pods, so a pod is kept small: equal labels, port
// lists, container ports and the repeated strings (namespace, node name,
// phase) are shared between pods (normalize-intern.ts), and lists are exactly
// as long as their contents.
import { ANY, listOf, object, objectFields, openObject } from './field-tree.ts';
import { formatIP, parseIP } from './ip.ts';
import type { IP } from './ip.ts';
import { isPortNumber, portNameErrors, PORT_RANGE_MESSAGE } from './k8s-names.ts';
import { field, isRecord, listField, normalizeLabels, readHead, show, subObject } from './normalize-common.ts';
import type { Normalized, Raw, Report } from './normalize-common.ts';
import { EMPTY, fnv1a, FNV_OFFSET, StringPool, WeakPool } from './normalize-intern.ts';
import { PROTOCOLS } from './types.ts';
import type { ContainerPort, Labels, Pod } from './types.ts';

/** Namespaces, node names and phases: few distinct values, repeated by every pod. */
const strings = new StringPool();

const labelPool = new WeakPool<Labels>((a, b) => {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
});

const portPool = new WeakPool<ContainerPort>((a, b) => a.name === b.name && a.port === b.port && a.protocol === b.protocol);

const portListPool = new WeakPool<readonly ContainerPort[]>((a, b) => a.length === b.length && a.every((p, i) => p === b[i]));

/** Pods with equal labels share one frozen labels object. */
function internLabels(labels: Labels): Labels {
  let h = FNV_OFFSET;
  for (const [k, v] of Object.entries(labels)) h = fnv1a(v, fnv1a(k, h) ^ 0x3d) ^ 0x2c;
  return labelPool.intern(h, Object.freeze(labels));
}

function portHash(p: ContainerPort, h: number): number {
  return fnv1a(p.protocol, fnv1a(p.name ?? '', h ^ p.port) ^ 0x2f) ^ 0x2c;
}

/** Pods with equal container ports share one frozen list of shared frozen ports. */
function internPorts(ports: readonly ContainerPort[]): readonly ContainerPort[] {
  if (ports.length === 0) return EMPTY;
  const shared = ports.map((p) => portPool.intern(portHash(p, FNV_OFFSET), Object.freeze(p)));
  let h = FNV_OFFSET;
  for (const p of shared) h = portHash(p, h);
  return portListPool.intern(h, Object.freeze(shared));
}

const CONTAINERS = listOf(
  openObject({ ports: listOf(object({ name: ANY, hostPort: ANY, containerPort: ANY, protocol: ANY, hostIP: ANY })) }),
);

/**
 * v1 Pod fields the project reads (strict field checks, field-tree.ts): the
 * top level, metadata and container ports are checked; the rest of spec and
 * status is open (their fields change with every Kubernetes release).
 */
export const POD_FIELDS = objectFields({
  spec: openObject({ containers: CONTAINERS, initContainers: CONTAINERS }),
  status: openObject({ podIPs: listOf(object({ ip: ANY })) }),
});

export function normalizePod(obj: unknown): Normalized<Pod> {
  const h = readHead(obj, 'Pod', true, 'v1');
  if (!h.ok) return h;
  const { name, metadata, sink } = h.head;
  const { report, errors } = sink;
  const spec = subObject(h.head.obj, 'spec', 'spec', report);
  const status = subObject(h.head.obj, 'status', 'status', report);

  const nodeName = optionalString(spec, 'nodeName', 'spec.nodeName', report);
  const hostNetworkRaw = field(spec, 'hostNetwork');
  if (hostNetworkRaw !== undefined && typeof hostNetworkRaw !== 'boolean')
    report('spec.hostNetwork', `must be a boolean, not ${show(hostNetworkRaw)}`);
  const phase = optionalString(status, 'phase', 'status.phase', report);
  const pod: Pod = {
    namespace: strings.intern(h.head.namespace ?? 'default'),
    name,
    labels: internLabels(normalizeLabels(field(metadata, 'labels'), 'metadata.labels', report).labels),
    nodeName: nodeName === undefined ? undefined : strings.intern(nodeName),
    hostNetwork: hostNetworkRaw === true,
    phase: phase === undefined ? undefined : strings.intern(phase),
    ips: podIPs(status, report),
    ports: internPorts(containerPorts(spec, report)),
  };
  return { ok: true, value: pod, errors };
}

function optionalString(obj: Raw, name: string, path: string, report: Report): string | undefined {
  const v = field(obj, name);
  if (v === undefined || v === '') return undefined;
  if (typeof v === 'string') return v;
  report(path, `must be a string, not ${show(v)}`);
  return undefined;
}

/** status.podIPs[].ip (falling back to status.podIP): canonical, one per family, v4 first. */
function podIPs(status: Raw, report: Report): readonly string[] {
  const list = listField(status, ['podIPs'], 'status.podIPs', report);
  const candidates: { path: string; value: unknown }[] = [];
  if (list !== undefined && list.length > 0) {
    list.forEach((e, i) => candidates.push({ path: `status.podIPs[${i}].ip`, value: isRecord(e) ? field(e, 'ip') : e }));
  } else {
    const single = field(status, 'podIP');
    if (single !== undefined && single !== '') candidates.push({ path: 'status.podIP', value: single });
  }
  const byFamily = new Map<number, IP>();
  for (const c of candidates) {
    const ip = typeof c.value === 'string' ? parseIP(c.value) : undefined;
    if (ip === undefined) {
      report(c.path, `must be a valid IP address, not ${show(c.value)}`);
    } else if (byFamily.has(ip.family)) {
      report(c.path, `may not have more than one IPv${ip.family} address`);
    } else {
      byFamily.set(ip.family, ip);
    }
  }
  // Literals: exactly as long as their contents (a pod's list lives as long as the pod).
  const v4 = byFamily.get(4);
  const v6 = byFamily.get(6);
  if (v4 === undefined) return v6 === undefined ? EMPTY : [formatIP(v6)];
  return v6 === undefined ? [formatIP(v4)] : [formatIP(v4), formatIP(v6)];
}

/** Ports of app containers and of sidecars (init containers with restartPolicy Always). */
function containerPorts(spec: Raw, report: Report): ContainerPort[] {
  const out = new Map<string, ContainerPort>();
  const scan = (listName: string, sidecarsOnly: boolean): void => {
    const containers = listField(spec, [listName], `spec.${listName}`, report) ?? [];
    containers.forEach((c, i) => {
      const cp = `spec.${listName}[${i}]`;
      if (!isRecord(c)) {
        report(cp, `must be an object, not ${show(c)}`);
        return;
      }
      if (sidecarsOnly && field(c, 'restartPolicy') !== 'Always') return;
      const ports = listField(c, ['ports'], `${cp}.ports`, report) ?? [];
      ports.forEach((p, j) => {
        const port = containerPort(p, `${cp}.ports[${j}]`, report);
        if (port !== undefined) out.set(`${port.name ?? ''}/${port.port}/${port.protocol}`, port);
      });
    });
  };
  scan('containers', false);
  scan('initContainers', true);
  return [...out.values()].sort(compareContainerPorts);
}

function compareContainerPorts(a: ContainerPort, b: ContainerPort): number {
  const an = a.name ?? '';
  const bn = b.name ?? '';
  if (an !== bn) return an < bn ? -1 : 1;
  if (a.port !== b.port) return a.port - b.port;
  return a.protocol < b.protocol ? -1 : a.protocol > b.protocol ? 1 : 0;
}

function containerPort(p: unknown, path: string, report: Report): ContainerPort | undefined {
  if (!isRecord(p)) {
    report(path, `must be an object, not ${show(p)}`);
    return undefined;
  }
  let ok = true;
  const bad = (fp: string, m: string): void => {
    ok = false;
    report(fp, m);
  };
  const num = field(p, 'containerPort');
  if (num === undefined) bad(`${path}.containerPort`, 'Required value');
  else if (!isPortNumber(num)) bad(`${path}.containerPort`, `${PORT_RANGE_MESSAGE} (got ${show(num)})`);
  const protoRaw = field(p, 'protocol');
  const protocol = protoRaw === undefined ? 'TCP' : PROTOCOLS.find((x) => x === protoRaw);
  if (protocol === undefined)
    bad(`${path}.protocol`, `Unsupported value: ${show(protoRaw)}: supported values: "TCP", "UDP", "SCTP"`);
  const nameRaw = field(p, 'name');
  let name: string | undefined;
  if (typeof nameRaw === 'string' && nameRaw !== '') {
    for (const m of portNameErrors(nameRaw)) bad(`${path}.name`, m);
    name = nameRaw;
  } else if (nameRaw !== undefined && nameRaw !== '') {
    bad(`${path}.name`, `must be a string, not ${show(nameRaw)}`);
  }
  if (!ok || protocol === undefined || typeof num !== 'number') return undefined;
  return { name, port: num, protocol };
}
