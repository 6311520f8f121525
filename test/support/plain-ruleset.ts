// A compiled ruleset with every element list as an array: a patched pod peer
// map or split set is a ChunkedList (compile/peer-split.ts), a fresh compile's
// an array, and assert.deepEqual compares them by kind as well as content.
import type { CompiledRuleset } from '../../src/ruleset/ir.ts';

export function plainRuleset(rs: CompiledRuleset): CompiledRuleset {
  return {
    ...rs,
    sets: rs.sets.map((s) => (Array.isArray(s.elements) ? s : { ...s, elements: [...s.elements] })),
    maps: rs.maps.map((m) => (Array.isArray(m.elements) ? m : { ...m, elements: [...m.elements] })),
  };
}
