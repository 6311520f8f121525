// render(compile(...)) for tests that want one node's script and its stats in
// one call. The renderer never compiles: callers compose the two.
import { compileNode } from '../../src/compile/compile.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import type { CompiledRuleset, RulesetStats } from '../../src/ruleset/ir.ts';
import type { RenderOptions } from '../../src/ruleset/options.ts';

export function renderNode(
  state: ClusterState,
  nodeName: string,
  opts?: Partial<RenderOptions>,
): { text: string; stats: RulesetStats; compiled: CompiledRuleset } {
  const c = compileNode(state, nodeName, opts);
  return { text: renderRuleset(c), stats: c.stats, compiled: c };
}
