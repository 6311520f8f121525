// What "the cluster DNS" and "the nodes' internal addresses" are for the
// isolation allowances (docs/tenancy.md): defaults and the parsing of the
// flags of render/explain/validate/run.
import { formatIP, parseIP } from './ip.ts';
import type { TenancyConfig } from './types.ts';

export type { TenancyConfig } from './types.ts';

export const DEFAULT_TENANCY: TenancyConfig = {
  dnsService: { namespace: 'kube-system', name: 'kube-dns' },
  nodeLocalDNS: ['169.254.25.10'],
  nodeAddresses: 'internal',
};

/** `NS/NAME` of the DNS service, or '' for none. */
export function parseDnsService(text: string): TenancyConfig['dnsService'] | Error {
  if (text === '') return undefined;
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)$/.exec(text);
  if (m === null || m[1] === undefined || m[3] === undefined) return new Error(`"${text}" is not NAMESPACE/NAME of a Service`);
  return { namespace: m[1], name: m[3] };
}

/** Comma-separated IP addresses ('' for none), canonical. */
export function parseAddressList(text: string): string[] | Error {
  const out: string[] = [];
  for (const part of text.split(',').map((s) => s.trim())) {
    if (part === '') continue;
    const ip = parseIP(part);
    if (ip === undefined) return new Error(`"${part}" is not an IP address`);
    out.push(formatIP(ip));
  }
  return [...new Set(out)].sort();
}

/** The config from flag texts (undefined = default); an Error names the bad flag value. */
export function tenancyConfig(flags: {
  readonly dnsService?: string | undefined;
  readonly nodeLocalDNS?: string | undefined;
  readonly nodeAddresses?: string | undefined;
}): TenancyConfig | Error {
  const dns = flags.dnsService === undefined ? DEFAULT_TENANCY.dnsService : parseDnsService(flags.dnsService);
  if (dns instanceof Error) return new Error(`--isolation-dns-service: ${dns.message}`);
  const local = flags.nodeLocalDNS === undefined ? DEFAULT_TENANCY.nodeLocalDNS : parseAddressList(flags.nodeLocalDNS);
  if (local instanceof Error) return new Error(`--isolation-node-local-dns: ${local.message}`);
  const na = flags.nodeAddresses ?? DEFAULT_TENANCY.nodeAddresses;
  if (na !== 'internal' && na !== 'all') return new Error(`--isolation-node-addresses must be internal or all, not "${na}"`);
  return { dnsService: dns, nodeLocalDNS: local, nodeAddresses: na };
}

export const TENANCY_FLAGS_HELP = `  --isolation-dns-service NS/NAME
                        the cluster DNS Service isolated namespaces may use
                        (port 53 to the pods it selects), default
                        kube-system/kube-dns; '' for none
  --isolation-node-local-dns IP[,IP]
                        node-local DNS cache addresses allowed on port 53,
                        default 169.254.25.10; '' for none
  --isolation-node-addresses internal|all
                        Node addresses isolated namespaces may reach and be
                        reached from: InternalIP (default) or also ExternalIP`;
