// Pod (v1) -> normalized Pod: labels, placement, IPs and named container ports.
import { formatIP, parseIP } from './ip.ts';
import type { IP } from './ip.ts';
import { isPortNumber, portNameErrors, PORT_RANGE_MESSAGE } from './k8s-names.ts';
import { field, isRecord, listField, normalizeLabels, readHead, show, subObject } from './normalize-common.ts';
import type { Normalized, Raw, Report } from './normalize-common.ts';
import { PROTOCOLS } from './types.ts';
import type { ContainerPort, Pod } from './types.ts';

export function normalizePod(obj: unknown): Normalized<Pod> {
  const h = readHead(obj, 'Pod', true, 'v1');
  if (!h.ok) return h;
  const { name, metadata, sink } = h.head;
  const { report, errors } = sink;
  const spec = subObject(h.head.obj, 'spec', 'spec', report);
  const status = subObject(h.head.obj, 'status', 'status', report);

  const nodeName = optionalString(spec, 'nodeName', 'spec.nodeName', report);
  const hostNetworkRaw = field(spec, 'hostNetwork');
  if (hostNetworkRaw !== undefined && typeof hostNetworkRaw !== 'boolean') report('spec.hostNetwork', `must be a boolean, not ${show(hostNetworkRaw)}`);
  const pod: Pod = {
    namespace: h.head.namespace ?? 'default',
    name,
    labels: normalizeLabels(field(metadata, 'labels'), 'metadata.labels', report).labels,
    nodeName,
    hostNetwork: hostNetworkRaw === true,
    phase: optionalString(status, 'phase', 'status.phase', report),
    ips: podIPs(status, report),
    ports: containerPorts(spec, report),
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
function podIPs(status: Raw, report: Report): string[] {
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
  return [4, 6].flatMap((f) => {
    const ip = byFamily.get(f);
    return ip === undefined ? [] : [formatIP(ip)];
  });
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
  if (protocol === undefined) bad(`${path}.protocol`, `Unsupported value: ${show(protoRaw)}: supported values: "TCP", "UDP", "SCTP"`);
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
