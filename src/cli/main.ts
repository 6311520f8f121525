// The one executable: render, explain, validate (pure, offline) and run,
// cleanup (the node agent). Exit codes: 0 ok, 1 invalid input or policy
// errors, 2 usage.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { readManifests, type LoadError } from '../model/load.ts';
import { stateBuilder } from '../model/normalize.ts';
import { formatValidationError, type ClusterState, type ValidationError } from '../model/types.ts';
import { compileNode } from '../compile/compile.ts';
import { renderRuleset } from '../nft/render.ts';
import { verdict } from '../policy/verdict.ts';
import { explainJson, explainText, parseEndpoint, parsePortProto } from '../policy/explain.ts';
import { tenancyConfig, TENANCY_FLAGS_HELP } from '../model/tenancy-config.ts';
import { tenancyPolicies } from '../kinds/tenancy.ts';
import type { TenancyNote } from '../kinds/tenancy.ts';

export const EXIT_OK = 0;
export const EXIT_INVALID = 1;
export const EXIT_USAGE = 2;

class UsageError extends Error {}

interface Io {
  out(s: string): void;
  err(s: string): void;
}

const stdio: Io = {
  out: (s) => process.stdout.write(s.endsWith('\n') ? s : `${s}\n`),
  err: (s) => process.stderr.write(s.endsWith('\n') ? s : `${s}\n`),
};

const TOP_HELP = `nft-netpol-agent: Kubernetes NetworkPolicy enforced with nftables

Usage: nft-netpol-agent <command> [options]

Commands:
  render    print the nftables ruleset one node must run
  explain   say whether a connection is allowed, and why
  validate  list every invalid field of the given policies
  run       run the node agent (watch the cluster, program nftables)
  cleanup   remove the agent's nftables table from this node
  denied    show the connections the agent on this node denied, and why
  status    is a policy in force on every node that must enforce it? (exit 3 if not)

Run 'nft-netpol-agent <command> --help' for the options of a command.
Exit codes: 0 ok, 1 invalid input or policy errors, 2 usage; status: 3 when
something is not in force everywhere.`;

const INPUT_HELP = `  -f, --filename PATH   manifest file or directory (YAML/JSON, multi-document,
                        kind: List; '-' reads stdin); repeatable, required
  --strict=BOOL         true (default): a field the API server does not know
                        (a typo such as podselector) is an error, as with
                        kubectl apply; false: a warning
  -o, --output FORMAT   text (default) or json
${TENANCY_FLAGS_HELP}
  -h, --help            show this help`;

const HELP: Record<string, string> = {
  render: `Usage: nft-netpol-agent render --node NAME -f PATH... [options]

Print the complete 'nft -f' script (one atomic transaction) that enforces the
NetworkPolicies of the given cluster objects on node NAME.

  --node NAME           the node to render for (required)
  --table NAME          nftables table (inet family), default nft-netpol
  --deny-action ACTION  drop (default) or reject
  --unknown-local-endpoints ACTION
                        allow (default) or drop: drop addresses of the node's
                        podCIDRs that are no known active local pod (opt-in,
                        for CNIs that allocate from the node's podCIDRs)
${INPUT_HELP}

Invalid policies are still rendered, fail-closed; their errors go to stderr
and the exit code is 1.`,
  explain: `Usage: nft-netpol-agent explain --from NS/POD|IP --to NS/POD|IP --port PORT[/PROTO] -f PATH...

Say whether a connection is allowed by the NetworkPolicies of the given cluster
objects, and which policies and rules decide it (egress at the source,
ingress at the destination).

  --from ENDPOINT       source pod (namespace/name) or IP address
  --to ENDPOINT         destination pod (namespace/name) or IP address
  --port PORT[/PROTO]   destination port, protocol TCP (default), UDP or SCTP
  --family 4|6          address family for pod endpoints (default 4)
${INPUT_HELP}`,
  validate: `Usage: nft-netpol-agent validate -f PATH...

List every invalid field of the given objects, one per line, as
'namespace/name field.path: message'. Exit code 1 when there is any.

${INPUT_HELP}`,
};

const INPUT_OPTIONS = {
  filename: { type: 'string', short: 'f', multiple: true },
  output: { type: 'string', short: 'o', default: 'text' },
  help: { type: 'boolean', short: 'h', default: false },
  strict: { type: 'string', default: 'true' },
  'isolation-dns-service': { type: 'string' },
  'isolation-node-local-dns': { type: 'string' },
  'isolation-node-addresses': { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

function parse<O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O) {
  try {
    // A bare `--strict` means true (parseArgs' boolean options take no `=false`, so the flag is a string).
    const normalized = 'strict' in options ? args.map((a) => (a === '--strict' ? '--strict=true' : a)) : args;
    return parseArgs({ args: normalized, options, strict: true, allowPositionals: false });
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

function outputFormat(v: string | undefined): 'text' | 'json' {
  if (v === 'text' || v === 'json') return v;
  throw new UsageError(`--output must be text or json, not "${v}"`);
}

interface Loaded {
  state: ClusterState;
  loadErrors: LoadError[];
  validationErrors: ValidationError[];
  /** Unknown fields under --strict=false. */
  warnings: ValidationError[];
  /** Tenancy facts that are not errors (validate prints them). */
  notes: readonly TenancyNote[];
}

interface InputFlags {
  readonly filename?: string[] | undefined;
  readonly strict?: string | undefined;
  readonly 'isolation-dns-service'?: string | undefined;
  readonly 'isolation-node-local-dns'?: string | undefined;
  readonly 'isolation-node-addresses'?: string | undefined;
}

async function loadInputs(v: InputFlags): Promise<Loaded> {
  const files = v.filename;
  if (files === undefined || files.length === 0) throw new UsageError('at least one -f/--filename is required');
  const config = tenancyConfig({
    dnsService: v['isolation-dns-service'],
    nodeLocalDNS: v['isolation-node-local-dns'],
    nodeAddresses: v['isolation-node-addresses'],
  });
  if (config instanceof Error) throw new UsageError(config.message);
  const strict = v.strict ?? 'true';
  if (strict !== 'true' && strict !== 'false') throw new UsageError(`--strict must be true or false, not "${strict}"`);
  // Each object is normalized as it is parsed: a big file's raw objects never pile up.
  const builder = stateBuilder({ unknownFields: strict === 'true' ? 'error' : 'warn' });
  const errors = await readManifests(files, { push: builder.add, list: builder.list });
  const built = builder.finish();
  // Offline commands always judge tenancy (the agent can turn it off).
  const state: ClusterState = { ...built.state, tenancy: config };
  const t = tenancyPolicies(state);
  return {
    state,
    loadErrors: errors,
    validationErrors: [...built.errors, ...[...t.errors.values()].flat()],
    warnings: built.warnings,
    notes: t.notes,
  };
}

function reportWarnings(io: Io, l: Loaded): void {
  for (const w of l.warnings) io.err(`warning: ${formatValidationError(w)}`);
}

function reportProblems(io: Io, l: Loaded): boolean {
  for (const e of l.loadErrors) io.err(`error: ${e.source}: ${e.message}`);
  reportWarnings(io, l);
  for (const e of l.validationErrors) io.err(`invalid: ${formatValidationError(e)}`);
  return l.loadErrors.length > 0 || l.validationErrors.length > 0;
}

async function renderCmd(args: string[], io: Io): Promise<number> {
  const { values: v } = parse(args, {
    ...INPUT_OPTIONS,
    node: { type: 'string' },
    table: { type: 'string', default: 'nft-netpol' },
    'deny-action': { type: 'string', default: 'drop' },
    'unknown-local-endpoints': { type: 'string', default: 'allow' },
  });
  if (v.help) return help(io, 'render');
  const format = outputFormat(v.output);
  if (v.node === undefined || v.node === '') throw new UsageError('--node is required');
  const denyAction = v['deny-action'];
  if (denyAction !== 'drop' && denyAction !== 'reject')
    throw new UsageError(`--deny-action must be drop or reject, not "${denyAction}"`);
  const unknownLocalEndpoints = v['unknown-local-endpoints'];
  if (unknownLocalEndpoints !== 'drop' && unknownLocalEndpoints !== 'allow') {
    throw new UsageError(`--unknown-local-endpoints must be allow or drop, not "${unknownLocalEndpoints}"`);
  }
  if (!/^[A-Za-z][A-Za-z0-9_-]{0,63}$/.test(v.table))
    throw new UsageError(`--table must be a plain identifier (letters, digits, - and _), not "${v.table}"`);
  const loaded = await loadInputs(v);
  const bad = reportProblems(io, loaded);
  if (loaded.loadErrors.length > 0) return EXIT_INVALID;
  if (!loaded.state.nodes.some((n) => n.name === v.node) && !loaded.state.pods.some((p) => p.nodeName === v.node)) {
    io.err(`warning: node "${v.node}" has no Node object and no pods in the input`);
  }
  const compiled = compileNode(loaded.state, v.node, { table: v.table, denyAction, unknownLocalEndpoints });
  const r = { text: renderRuleset(compiled), stats: compiled.stats };
  if (format === 'json') {
    io.out(
      JSON.stringify(
        {
          node: v.node,
          stats: r.stats,
          errors: loaded.validationErrors.map(formatValidationError),
          warnings: loaded.warnings.map(formatValidationError),
          ruleset: r.text,
        },
        null,
        2,
      ),
    );
  } else {
    io.out(r.text);
  }
  return bad ? EXIT_INVALID : EXIT_OK;
}

async function explainCmd(args: string[], io: Io): Promise<number> {
  const { values: v } = parse(args, {
    ...INPUT_OPTIONS,
    from: { type: 'string' },
    to: { type: 'string' },
    port: { type: 'string' },
    family: { type: 'string', default: '4' },
  });
  if (v.help) return help(io, 'explain');
  const format = outputFormat(v.output);
  if (v.from === undefined || v.to === undefined || v.port === undefined)
    throw new UsageError('--from, --to and --port are required');
  if (v.family !== '4' && v.family !== '6') throw new UsageError(`--family must be 4 or 6, not "${v.family}"`);
  const family = v.family === '4' ? 4 : 6;
  const pp = parsePortProto(v.port);
  if (!pp.ok) throw new UsageError(`--port: ${pp.error}`);
  const loaded = await loadInputs(v);
  if (loaded.loadErrors.length > 0) {
    reportProblems(io, loaded);
    return EXIT_INVALID;
  }
  const from = parseEndpoint(loaded.state, v.from);
  const to = parseEndpoint(loaded.state, v.to);
  if (!from.ok || !to.ok) {
    if (!from.ok) io.err(`error: --from: ${from.error}`);
    if (!to.ok) io.err(`error: --to: ${to.error}`);
    return EXIT_INVALID;
  }
  const result = verdict(loaded.state, from.value, to.value, pp.value.protocol, pp.value.port, { family });
  if (format === 'json') io.out(JSON.stringify(explainJson(result, from.value, to.value), null, 2));
  else io.out(explainText(result, from.value, to.value));
  // Invalid policies are part of the answer (they fail closed), not a usage problem.
  reportWarnings(io, loaded);
  for (const e of loaded.validationErrors) io.err(`invalid: ${formatValidationError(e)}`);
  return loaded.validationErrors.length > 0 ? EXIT_INVALID : EXIT_OK;
}

async function validateCmd(args: string[], io: Io): Promise<number> {
  const { values: v } = parse(args, INPUT_OPTIONS);
  if (v.help) return help(io, 'validate');
  const format = outputFormat(v.output);
  const loaded = await loadInputs(v);
  const problem = (e: ValidationError): { object: string; path: string; message: string; text: string } => ({
    object: e.namespace === undefined ? `${e.kind}/${e.name}` : `${e.kind} ${e.namespace}/${e.name}`,
    path: e.path,
    message: e.message,
    text: formatValidationError(e),
  });
  const problems = [
    ...loaded.loadErrors.map((e) => ({ object: e.source, path: '', message: e.message, text: `${e.source}: ${e.message}` })),
    ...loaded.validationErrors.map(problem),
  ];
  if (format === 'json') {
    const plain = ({ text: _t, ...rest }: { object: string; path: string; message: string; text: string }) => rest;
    io.out(
      JSON.stringify(
        { valid: problems.length === 0, errors: problems.map(plain), warnings: loaded.warnings.map(problem).map(plain) },
        null,
        2,
      ),
    );
  } else if (problems.length === 0) {
    const s = loaded.state;
    io.out(
      `ok: ${s.policies.length} policies, ${s.pods.length} pods, ${s.namespaces.length} namespaces, ${s.nodes.length} nodes; no errors`,
    );
  } else {
    for (const p of problems) io.out(p.text);
  }
  // Warnings and notes never change the exit code (and stay off stdout for -o json).
  reportWarnings(io, loaded);
  for (const n of loaded.notes) io.err(`note: ${n.message}`);
  return problems.length > 0 ? EXIT_INVALID : EXIT_OK;
}

function help(io: Io, cmd?: string): number {
  io.out(cmd === undefined ? TOP_HELP : (HELP[cmd] ?? TOP_HELP));
  return EXIT_OK;
}

export async function main(argv: string[], io: Io = stdio): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case 'render':
        return await renderCmd(rest, io);
      case 'explain':
        return await explainCmd(rest, io);
      case 'validate':
        return await validateCmd(rest, io);
      case 'denied': {
        const { deniedCommand } = await import('./denied.ts');
        const stopped = new Promise<void>((resolve) => {
          process.once('SIGINT', () => resolve());
          process.once('SIGTERM', () => resolve());
        });
        return await deniedCommand(rest, { ...io, stopped });
      }
      case 'status': {
        const { statusCommand } = await import('./status.ts');
        return await statusCommand(rest, io);
      }
      case 'run':
      case 'cleanup': {
        const agent = await import('./run.ts');
        return cmd === 'run' ? await agent.runCommand(rest) : await agent.cleanupCommand(rest);
      }
      case undefined:
      case '-h':
      case '--help':
      case 'help':
        return help(io, rest[0]);
      default:
        throw new UsageError(`unknown command "${cmd}"`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`usage error: ${e.message}\n(see 'nft-netpol-agent ${cmd !== undefined && cmd in HELP ? `${cmd} ` : ''}--help')`);
      return EXIT_USAGE;
    }
    io.err(`error: ${e instanceof Error ? e.message : String(e)}`);
    return EXIT_INVALID;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
