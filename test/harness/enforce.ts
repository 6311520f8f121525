// Puts a cluster state into the simulated nodes exactly as the agent does:
// the renderer's `nft -f` script of each node, applied with runNft inside the
// node's namespace.
import type { TierLayout } from '../../src/ruleset/options.ts';
import { buildState } from '../../src/model/normalize.ts';
import { formatValidationError } from '../../src/model/types.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { runNft } from '../../src/nft/exec.ts';
import { renderNode } from '../support/render-node.ts';
import type { CompiledRuleset, RulesetStats } from '../../src/ruleset/ir.ts';
import type { Cluster } from './cluster.ts';

export interface EnforceOptions {
  /** Default 'reject': blocked probes fail at once instead of timing out. */
  readonly denyAction?: 'drop' | 'reject';
  /** Default nft-netpol (the agent's table). */
  readonly table?: string;
  /** Default off, as the agent's --allow-pod-to-node. */
  readonly allowPodToNode?: boolean;
  /** Default 'auto': how the ClusterNetworkPolicy tiers reach their decisions (compile/tiers.ts). */
  readonly tierLayout?: TierLayout;
  /** Default 1024 (compile/peer-split.ts): the fewest addresses of an identity split out of its pod peer map. */
  readonly peerSplitMin?: number | undefined;
  /** Test hook: changes a rendered script before it is applied (to check that the harness notices a broken ruleset). */
  readonly mutate?: (text: string, node: string) => string;
}

export interface AppliedRuleset {
  readonly node: string;
  readonly text: string;
  readonly stats: RulesetStats;
  /** What the text was rendered from (tests that look at chains and maps). */
  readonly compiled: CompiledRuleset;
}

/** Renders and applies every node's ruleset (in parallel). Throws with nft's message and the script on failure. */
export async function applyState(c: Cluster, state: ClusterState, opts: EnforceOptions = {}): Promise<AppliedRuleset[]> {
  const renderOpts = {
    denyAction: opts.denyAction ?? 'reject',
    allowPodToNode: opts.allowPodToNode ?? false,
    ...(opts.table === undefined ? {} : { table: opts.table }),
    ...(opts.tierLayout === undefined ? {} : { tierLayout: opts.tierLayout }),
    ...(opts.peerSplitMin === undefined ? {} : { peerSplitMin: opts.peerSplitMin }),
  };
  return Promise.all(
    c.nodes.map(async (n) => {
      const rendered = renderNode(state, n.name, renderOpts);
      const text = opts.mutate === undefined ? rendered.text : opts.mutate(rendered.text, n.name);
      const stats = rendered.stats;
      const r = await runNft(text, { netns: n.netns });
      if (!r.ok) {
        const numbered = text
          .split('\n')
          .map((l, i) => `${String(i + 1).padStart(4)}  ${l}`)
          .join('\n');
        throw new Error(`nft -f failed for node ${n.name}: ${r.error}\n${numbered}`);
      }
      return { node: n.name, text, stats, compiled: rendered.compiled };
    }),
  );
}

/** buildState that refuses objects with validation errors unless they are expected (a test's input must be what it means). */
export function stateOf(objects: readonly unknown[], opts: { allowErrors?: boolean } = {}): ClusterState {
  const { state, errors } = buildState(objects);
  if (errors.length > 0 && opts.allowErrors !== true)
    throw new Error(`invalid test objects:\n${errors.map(formatValidationError).join('\n')}`);
  return state;
}

/** The current ruleset of a node, as nft lists it (for reports). */
export async function listRuleset(c: Cluster, node: string): Promise<string> {
  return (await c.exec(node, 'nft', ['list', 'ruleset'])).stdout;
}
