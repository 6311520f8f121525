// Human sentences about tenancy for explain and the debug endpoint: why an
// isolated namespace's pod may not talk to another endpoint.
import { WORKSPACE_LABEL } from '../model/normalize-tenancy.ts';
import type { ClusterState, NetworkPolicy, Pod } from '../model/types.ts';

/** The other side of a connection, as the evaluator sees it. */
interface OtherSide {
  readonly label: string;
  /** Set only for active pods. */
  readonly pod: Pod | undefined;
}

/** "workspace `acme` is isolated and `lab` is not in it", for an isolation policy; undefined for other policies. */
export function isolationDenial(state: ClusterState, p: NetworkPolicy, other: OtherSide): string | undefined {
  const src = p.source;
  if (src === undefined || src.kind === 'NamespaceNetworkPolicy') return undefined;
  const otherNs = other.pod?.namespace;
  if (src.kind === 'ProjectIsolation') {
    const also = src.overrides === undefined ? '' : ` (project isolation applies, not that of workspace \`${src.overrides}\`)`;
    const who = otherNs === undefined ? `${other.label} is not a pod of it` : `\`${otherNs}\` is another namespace`;
    return `project \`${p.namespace}\` is isolated${also} and ${who}`;
  }
  if (otherNs === undefined) return `workspace \`${src.workspace}\` is isolated and ${other.label} is not a pod in it`;
  const ns = state.namespaces.find((n) => n.name === otherNs);
  const theirs = ns?.labels[WORKSPACE_LABEL];
  const where = theirs === undefined ? 'no workspace' : `workspace \`${theirs}\``;
  return `workspace \`${src.workspace}\` is isolated and \`${otherNs}\` is not in it (it is in ${where})`;
}

/** One line per derived policy, for /debug/state and render comments: what it is and every rule's cause. */
export function describeDerived(p: NetworkPolicy): string[] {
  const src = p.source;
  if (src === undefined) return [];
  const head =
    src.kind === 'NamespaceNetworkPolicy'
      ? `NamespaceNetworkPolicy ${p.namespace}/${src.name}`
      : src.kind === 'ProjectIsolation'
        ? `project isolation of ns ${p.namespace}${src.overrides === undefined ? '' : ` (overrides workspace ${src.overrides})`}`
        : `workspace isolation of ${src.workspace} in ns ${p.namespace}`;
  const lines = [head];
  for (const [d, rules] of [
    ['ingress', p.ingress],
    ['egress', p.egress],
  ] as const) {
    rules.forEach((r, i) => lines.push(`  ${d}[${i}]${r.invalid ? ' (allows nothing)' : ''}: ${r.cause ?? ''}`));
  }
  return lines;
}
