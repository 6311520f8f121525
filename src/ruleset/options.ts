// The choices a node's ruleset is compiled with (flags of the agent and the
// CLI), their defaults and their validation. Beneath compile and nft: both read them.
import { DEFAULT_TABLE } from './ids.ts';

export interface RenderOptions {
  /** nft table name (inet family). */
  readonly table: string;
  /** Verdict for traffic no policy allows. */
  readonly denyAction: 'drop' | 'reject';
  /**
   * Only when the node has podCIDRs: an address in them that is not a known
   * active local pod is dropped in the forward chains ('drop', the default:
   * fail closed for pods created a moment ago) or passes unfiltered ('allow',
   * as without podCIDRs).
   */
  readonly unknownLocalEndpoints: 'drop' | 'allow';
}

export const DEFAULT_OPTIONS: RenderOptions = { table: DEFAULT_TABLE, denyAction: 'drop', unknownLocalEndpoints: 'allow' };

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,62}$/;

export function resolveOptions(opts?: Partial<RenderOptions>): RenderOptions {
  const o: RenderOptions = {
    table: opts?.table ?? DEFAULT_OPTIONS.table,
    denyAction: opts?.denyAction ?? DEFAULT_OPTIONS.denyAction,
    unknownLocalEndpoints: opts?.unknownLocalEndpoints ?? DEFAULT_OPTIONS.unknownLocalEndpoints,
  };
  if (!TABLE_NAME.test(o.table)) throw new Error(`invalid nft table name "${o.table}": use letters, digits, '_' and '-'`);
  if (o.denyAction !== 'drop' && o.denyAction !== 'reject')
    throw new Error(`invalid denyAction "${String(o.denyAction)}": drop or reject`);
  if (o.unknownLocalEndpoints !== 'drop' && o.unknownLocalEndpoints !== 'allow') {
    throw new Error(`invalid unknownLocalEndpoints "${String(o.unknownLocalEndpoints)}": drop or allow`);
  }
  return o;
}
