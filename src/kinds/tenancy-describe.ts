// Human sentences about tenancy for explain: why an isolated namespace's pod
// may not talk to another endpoint.
import { WORKSPACE_LABEL } from '../model/normalize-tenancy.ts';
import type { ClusterState, Pod } from '../model/types.ts';
import type { ContributedPolicy } from './kind.ts';
import { isolationOf, PROJECT_ISOLATION, WORKSPACE_ISOLATION } from './tenancy.ts';

/** The other side of a connection, as the evaluator sees it. */
interface OtherSide {
  readonly label: string;
  /** Set only for active pods. */
  readonly pod: Pod | undefined;
}

/** "workspace acme is isolated and lab is not in it", for an isolation policy; undefined for other kinds. */
export function isolationDenial(state: ClusterState, p: ContributedPolicy, other: OtherSide): string | undefined {
  const otherNs = other.pod?.namespace;
  if (p.origin.kind === PROJECT_ISOLATION) {
    const ns = state.namespaces.find((n) => n.name === p.namespace);
    const iso = ns === undefined ? undefined : isolationOf(state, ns);
    const also =
      iso?.workspaceOverridden === true ? ` (project isolation applies, not that of workspace ${iso.workspace ?? ''})` : '';
    const who = otherNs === undefined ? `${other.label} is not a pod of it` : `${otherNs} is another namespace`;
    return `project ${p.namespace} is isolated${also} and ${who}`;
  }
  if (p.origin.kind !== WORKSPACE_ISOLATION) return undefined;
  const ws = p.origin.name;
  if (otherNs === undefined) return `workspace ${ws} is isolated and ${other.label} is not a pod in it`;
  const theirs = state.namespaces.find((n) => n.name === otherNs)?.labels[WORKSPACE_LABEL];
  return `workspace ${ws} is isolated and ${otherNs} is not in it (it is in ${theirs === undefined ? 'no workspace' : `workspace ${theirs}`})`;
}
