// The one executable: render, explain, validate (pure, offline) and run,
// cleanup (the node agent). Exit codes: 0 ok, 1 invalid input or policy
// errors, 2 usage.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { readManifests, type LoadError } from '../model/load.ts';
import { stateBuilder } from '../model/normalize.ts';
import { formatValidationError, type ClusterState, type ValidationError } from '../model/types.ts';
import { compileNode } from '../compile/compile.ts';
import { renderRuleset } from '../nft/render.ts';
import { answerExplain, explainJson, explainText, parseExplainParams } from '../policy/explain.ts';
import { stagedChangesText, stagedPolicyLabels, stagedVerdict } from '../policy/staged.ts';
import { STAGED_ANNOTATION, stagedNames } from '../model/staged.ts';
import { buildInfo, versionText } from '../observability/build-info.ts';
import {
  kindCounter,
  countsText,
  formatDocument,
  loadErrorObject,
  parseFormat,
  validationErrorObject,
  type ErrorObject,
  type Format,
  type KindCounts,
} from './output.ts';
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
  rules     list the policy rules of this node by the connections they decided
  status    is a policy in force on every node that must enforce it? (exit 3 if not)

Run 'nft-netpol-agent <command> --help' for the options of a command;
'nft-netpol-agent --version' prints the version, commit and Node.js version.
Exit codes: 0 ok, 1 invalid input or policy errors, 2 usage; status: 3 when
something is not in force everywhere.`;

const INPUT_HELP = `  -f, --filename PATH   manifest file or directory (YAML/JSON, multi-document,
                        kind: List; '-' reads stdin); repeatable, required
  --strict=BOOL         true (default): a field the API server does not know
                        (a typo such as podselector) is an error, as with
                        kubectl apply; false: a warning
  -o, --output FORMAT   text (default), json or yaml; errors in json and yaml
                        are objects {object, path, message}
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
  --allow-pod-to-node   egress from local pods to the node itself always passes
                        (as the Kubernetes docs say; off by default)
${INPUT_HELP}

Invalid policies are still rendered, fail-closed; their errors go to stderr
(and into the json/yaml document) and the exit code is 1. Objects of kinds
the engine does not read are counted on stderr ('ignored: 1 Deployment').`,
  explain: `Usage: nft-netpol-agent explain --from NS/POD|IP --to NS/POD|IP --port PORT[/PROTO] -f PATH...

Say whether a connection is allowed by the NetworkPolicies of the given cluster
objects, and which policies and rules decide it (egress at the source,
ingress at the destination).

  --from ENDPOINT       source pod (namespace/name) or IP address
  --to ENDPOINT         destination pod (namespace/name) or IP address
  --port PORT[/PROTO]   destination port, protocol TCP (default), UDP or SCTP
  --family 4|6          address family when both endpoints are pods (default 4);
                        an IP address on either side sets the family (a
                        --family that contradicts it is a usage error)
  --allow-pod-to-node   judge as an agent run with --allow-pod-to-node: egress
                        from a pod to an address of its own node is allowed
  --staged              also judge with the staged policies (annotated
                        nft-netpol.io/staged: "true") enforced: the verdict
                        they would give, and per direction whether it would
                        change ("would deny", "would allow"), by which staged
                        policy and rule
${INPUT_HELP}`,
  validate: `Usage: nft-netpol-agent validate -f PATH...

List every invalid field of the given objects, one per line, as
'namespace/name field.path: message' ('name field.path: message' for
cluster-scoped objects: ClusterNetworkPolicy and the legacy
AdminNetworkPolicy / BaselineAdminNetworkPolicy). Exit code 1 when there is any.
What was read and what was ignored (kinds the engine does not read) goes to stderr.

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

function outputFormat(v: string | undefined): Format {
  const f = parseFormat(v);
  if (f === undefined) throw new UsageError(`--output must be text, json or yaml, not "${v}"`);
  return f;
}

/** Writes a json or yaml document. */
function emit(io: Io, format: 'json' | 'yaml', doc: unknown): void {
  io.out(formatDocument(format, doc));
}

interface Loaded {
  state: ClusterState;
  /** Objects by kind, read and ignored. */
  kinds: KindCounts;
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
  const kinds = kindCounter();
  const push = (o: unknown): void => {
    kinds.add(o);
    builder.add(o);
  };
  const errors = await readManifests(files, { push, list: builder.list });
  const built = builder.finish();
  // Offline commands always judge tenancy (the agent can turn it off).
  const state: ClusterState = { ...built.state, tenancy: config };
  const t = tenancyPolicies(state);
  return {
    state,
    kinds: kinds.counts(),
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

/** Objects of kinds the engine does not read are no error, but never skipped without a word. */
function reportIgnored(io: Io, l: Loaded): void {
  if (Object.keys(l.kinds.ignored).length > 0)
    io.err(`ignored: ${countsText(l.kinds.ignored)} (kinds nft-netpol-agent does not read)`);
}

function errorObjects(l: Loaded): ErrorObject[] {
  return [...l.loadErrors.map(loadErrorObject), ...l.validationErrors.map(validationErrorObject)];
}

/** Unknown fields under --strict=false, as error objects are. */
function warningObjects(l: Loaded): ErrorObject[] {
  return l.warnings.map(validationErrorObject);
}

async function renderCmd(args: string[], io: Io): Promise<number> {
  const { values: v } = parse(args, {
    ...INPUT_OPTIONS,
    node: { type: 'string' },
    table: { type: 'string', default: 'nft-netpol' },
    'deny-action': { type: 'string', default: 'drop' },
    'unknown-local-endpoints': { type: 'string', default: 'allow' },
    'allow-pod-to-node': { type: 'boolean', default: false },
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
  reportIgnored(io, loaded);
  if (loaded.loadErrors.length > 0) {
    // Nothing is rendered from input that could not be read; scripts still get a document.
    if (format !== 'text') emit(io, format, { node: v.node, stats: null, errors: errorObjects(loaded), ruleset: null });
    return EXIT_INVALID;
  }
  if (!loaded.state.nodes.some((n) => n.name === v.node) && !loaded.state.pods.some((p) => p.nodeName === v.node)) {
    io.err(`warning: node "${v.node}" has no Node object and no pods in the input`);
  }
  const compiled = compileNode(loaded.state, v.node, {
    table: v.table,
    denyAction,
    unknownLocalEndpoints,
    allowPodToNode: v['allow-pod-to-node'],
  });
  const text = renderRuleset(compiled);
  if (format === 'text') io.out(text);
  else
    emit(io, format, {
      node: v.node,
      stats: compiled.stats,
      errors: errorObjects(loaded),
      warnings: warningObjects(loaded),
      ruleset: text,
    });
  return bad ? EXIT_INVALID : EXIT_OK;
}

async function explainCmd(args: string[], io: Io): Promise<number> {
  const { values: v } = parse(args, {
    ...INPUT_OPTIONS,
    from: { type: 'string' },
    to: { type: 'string' },
    port: { type: 'string' },
    family: { type: 'string' },
    'allow-pod-to-node': { type: 'boolean', default: false },
    staged: { type: 'boolean', default: false },
  });
  if (v.help) return help(io, 'explain');
  const format = outputFormat(v.output);
  if (v.from === undefined || v.to === undefined || v.port === undefined)
    throw new UsageError('--from, --to and --port are required');
  const query = parseExplainParams({ from: v.from, to: v.to, port: v.port, family: v.family });
  if (!query.ok) throw new UsageError(query.problems.map((p) => `--${p.param}: ${p.message}`).join('; '));
  const loaded = await loadInputs(v);
  reportIgnored(io, loaded);
  const failed = (errors: ErrorObject[]): number => {
    if (format !== 'text') emit(io, format, { allowed: null, errors });
    return EXIT_INVALID;
  };
  if (loaded.loadErrors.length > 0) {
    reportProblems(io, loaded);
    return failed(errorObjects(loaded));
  }
  const answer = answerExplain(loaded.state, query.value, { allowPodToNode: v['allow-pod-to-node'] });
  if (!answer.ok) {
    for (const p of answer.problems) io.err(`error: --${p.param}: ${p.message}`);
    return failed(answer.problems.map((p) => ({ object: `--${p.param}`, path: '', message: p.message })));
  }
  const { verdict: result, from, to } = answer.value;
  const sv = v.staged
    ? stagedVerdict(loaded.state, from, to, result.protocol, result.port, {
        family: result.family,
        allowPodToNode: v['allow-pod-to-node'],
      })
    : undefined;
  const stagedCount = stagedPolicyLabels(loaded.state).size;
  if (format === 'text')
    io.out(explainText(result, from, to) + (sv === undefined ? '' : `\n${stagedChangesText(sv, stagedCount)}`));
  else
    emit(io, format, {
      ...explainJson(result, from, to),
      ...(sv === undefined
        ? {}
        : { staged: { policies: [...stagedPolicyLabels(loaded.state)], allowed: sv.staged.allowed, changes: sv.changes } }),
      errors: errorObjects(loaded),
      warnings: warningObjects(loaded),
    });
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
  const errors = errorObjects(loaded);
  // The text form keeps the familiar "ns/name path: message" of the validation errors.
  const lines = [
    ...loaded.loadErrors.map((e) => `${e.source}: ${e.message}`),
    ...loaded.validationErrors.map(formatValidationError),
  ];
  const { read, ignored } = loaded.kinds;
  const staged = stagedNames(loaded.state);
  const stagedCount = staged.policies.length + staged.clusterPolicies.length;
  if (format !== 'text') {
    emit(io, format, { valid: errors.length === 0, errors, warnings: warningObjects(loaded), read, ignored, staged });
  } else if (errors.length === 0) {
    const s = loaded.state;
    const cn = s.clusterPolicies?.length ?? 0;
    const clusterPolicies = cn === 0 ? '' : `${cn} cluster network ${cn === 1 ? 'policy' : 'policies'}, `;
    const stagedText = stagedCount === 0 ? '' : ` (${stagedCount} staged, not enforced)`;
    io.out(
      `ok: ${s.policies.length} policies, ${clusterPolicies}${s.pods.length} pods, ${s.namespaces.length} namespaces, ${s.nodes.length} nodes${stagedText}; no errors`,
    );
  } else {
    for (const l of lines) io.out(l);
  }
  io.err(`read: ${Object.keys(read).length === 0 ? 'nothing' : countsText(read)}`);
  // Staged policies are valid or not like any other; they are named so that nobody takes them for enforced ones.
  for (const p of staged.policies) io.err(`staged: NetworkPolicy ${p} (annotated ${STAGED_ANNOTATION}: "true"; not enforced)`);
  for (const p of staged.clusterPolicies) io.err(`staged: ${p} (annotated ${STAGED_ANNOTATION}: "true"; not enforced)`);
  reportIgnored(io, loaded);
  // Warnings and notes never change the exit code (and stay off stdout for -o json).
  reportWarnings(io, loaded);
  for (const n of loaded.notes) io.err(`note: ${n.message}`);
  return errors.length > 0 ? EXIT_INVALID : EXIT_OK;
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
      case 'rules': {
        const { rulesCommand } = await import('./rules.ts');
        return await rulesCommand(rest, io);
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
      case '--version':
      case 'version':
        io.out(versionText(await buildInfo()));
        return EXIT_OK;
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

/** 128 + SIGPIPE: what a shell reports for kubectl (or cat) whose reader went away. */
export const EXIT_BROKEN_PIPE = 141;

/**
 * A reader that goes away (`render ... | head -1`) ends the command quietly,
 * as kubectl does: no stack trace, exit status 141. The agent (`run`) writes
 * only logs there and keeps enforcing.
 */
function quietOnBrokenPipe(cmd: string | undefined): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (cmd === 'run') return;
      if (e.code === 'EPIPE') process.exit(EXIT_BROKEN_PIPE);
      if (stream === process.stdout) process.stderr.write(`error: cannot write the output: ${e.message}\n`);
      process.exit(EXIT_INVALID);
    });
  }
}

/** The commands that read manifest files into one big state. */
const OFFLINE = new Set(['render', 'explain', 'validate']);

/**
 * Keeps V8's young generation at its start size for the offline commands: a
 * big manifest file builds a large state object by object, and V8 grows the
 * young generation with what survives, to about 100 MiB resident for a 20 MB
 * file, for no measurable gain (docs/benchmarks.md, "Big manifest files").
 * The agent caps it with --max-semi-space-size in NODE_OPTIONS instead, a flag
 * that only works at start-up; the growth factor is read whenever V8 resizes.
 * Left alone when the user sized the young generation.
 */
function keepYoungGenerationSmall(cmd: string | undefined): void {
  if (cmd === undefined || !OFFLINE.has(cmd)) return;
  if ([...process.execArgv, process.env['NODE_OPTIONS'] ?? ''].some((a) => a.includes('semi-space'))) return;
  setFlagsFromString('--semi-space-growth-factor=1');
}

/** How much the agent's old generation may grow past what the last full GC left before the next one. */
const AGENT_HEAP_GROWING_PERCENT = 30;

/**
 * Spaces out the agent's full garbage collections. Under the DaemonSet's
 * --max-old-space-size=384 V8 let the old generation grow ~15 % at 100k pods
 * before collecting again: a mark-compact every 25-40 changes, whose marking
 * steps (up to 20-50 ms) and pause landed in the change being applied, the
 * p99 of a change. At 30 % a third as many, p99 a fifth lower, the same RSS
 * (docs/benchmarks.md, "Fewer full collections"). NODE_OPTIONS refuses the
 * flag, and V8 reads it at every collection, so it is set here; a
 * --heap-growing-percent on the command line wins.
 */
function spaceOutFullCollections(cmd: string | undefined): void {
  if (cmd !== 'run') return;
  if (process.execArgv.some((a) => a.includes('heap-growing-percent'))) return;
  setFlagsFromString(`--heap-growing-percent=${AGENT_HEAP_GROWING_PERCENT}`);
}

/** The process's entry point (bin/nft-netpol-agent.js, `node src/cli/main.ts`, the image's dist/cli/main.js). */
export async function runMain(argv: string[]): Promise<void> {
  quietOnBrokenPipe(argv[0]);
  keepYoungGenerationSmall(argv[0]);
  spaceOutFullCollections(argv[0]);
  process.exitCode = await main(argv);
}

if (import.meta.main) {
  await runMain(process.argv.slice(2));
}
