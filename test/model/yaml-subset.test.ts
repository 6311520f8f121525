// The fast YAML subset reader (src/model/yaml-subset.ts) against the full
// `yaml` library: whatever it accepts, it must read exactly as the library
// does; whatever the library rejects, it must decline (FALLBACK).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseAllDocuments, parseDocument, stringify } from 'yaml';
import { FALLBACK, parseSubset, splitDocuments } from '../../src/model/yaml-subset.ts';
import { parseManifestText, type LoadError } from '../../src/model/load.ts';

/** The library's reading of one document: its value, or 'error'. */
function library(text: string): unknown {
  const doc = parseDocument(text, { merge: true });
  if (doc.errors.length > 0) return 'error';
  return doc.toJS({ maxAliasCount: 1000 }) as unknown;
}

/** True when the fast reader accepted the text (and then agreed with the library). */
function agrees(text: string): boolean {
  const fast = parseSubset(text);
  if (fast === FALLBACK) return false;
  assert.deepStrictEqual(fast, library(text), JSON.stringify(text));
  return true;
}

test('accepted documents read as the library reads them: hand-picked cases', () => {
  const accepted = [
    'a: 1\nb: -2\nc: +3\nd: 007\ne: true\nf: False\ng: ~\nh: null\ni:\nj: x y\n',
    'a: x #c\nb: "q # not a comment"\nc: \'it\'\'s\'\nd: "\\u00e9\\n\\"x\\""\n',
    'a:\n- 1\n- 2\nb: 3\n',
    'a:\n  - b: 1\n    c: 2\n  - d\n  -\n  - - x\n    - y\n',
    'a: {}\nb: []\nc: {x: 1, "y": [1, {z: "w"}], v: }\nd: [a, b,]\n',
    'ip: 10.0.0.1\ncidr: 10.0.0.0/8\nv6: "fd00::1"\nurl: http://x:80/y\nver: 1.2.3\nneg: -x\n',
    '  a: 1\n  b:\n    c: 2\n',
    '# comment\na: 1\n   # indented comment\nb: 2\n',
    'labels:\n  app.kubernetes.io/name: web\n  team: a\n',
    '"a": 1\n\'b c\': x\n"1": y\n',
    '- -a: 1\n  "x": {}\n',
  ];
  for (const t of accepted) {
    assert.notEqual(parseSubset(t), FALLBACK, t);
    agrees(t);
  }
});

test('hard cases are declined, never misread', () => {
  const declined = [
    'a: &x 1\nb: *x\n',
    'a: !!str 1\n',
    'a: |\n  x\n',
    'a: >\n  x\n',
    'a: 1.5\n',
    'a: 1e3\n',
    'a: .inf\n',
    'a: 0x1F\n',
    'a: 0o17\n',
    'a: 12345678901234567890\n',
    'a: 1\na: 2\n',
    'a:\tb\n',
    'a: 1\r\n',
    'a: b: c\n',
    'a: some\n  continued\n',
    'a: 1\n  b: 2\n',
    '"a":1\n',
    '? a\n: 1\n',
    '<<: {a: 1}\n',
    '__proto__: 1\n',
    '1: a\n',
    'true: a\n',
    'a: [1,\n  2]\n',
    'a: "x\n  y"\n',
    'x: - a\n',
    'plain scalar\ncontinued\n',
    'a: "\\x41"\n',
    'k:{"t":"R"}: 1\n',
  ];
  for (const t of declined) assert.equal(parseSubset(t), FALLBACK, t);
});

// Documents as generators write them: the library's own stringify of random
// JSON-like values, hostile (any string, floats) and tame (what manifests hold).
const tameKey = fc.oneof(
  fc.constantFrom('a', 'b', 'app', 'name', 'kubernetes.io/name', 'x-y', 'k.z', 'null', 'true', '1', '-a', 'a b', '#a', 'a#b'),
  fc.stringMatching(/^[a-z][a-z0-9./-]{0,8}$/),
);
const tameScalar = fc.oneof(
  fc.constantFrom(
    '',
    'x',
    'true',
    'null',
    '~',
    '1',
    '-1',
    '007',
    '1.5',
    '10.0.0.1',
    'a: b',
    '# x',
    "it's",
    '"q"',
    '- a',
    ' lead',
    'trail ',
  ),
  fc.stringMatching(/^[a-z0-9][a-z0-9./:-]{0,10}$/),
  fc.integer({ min: -1e6, max: 1e6 }),
  fc.boolean(),
  fc.constant(null),
);
const hostileKey = fc.oneof(tameKey, fc.string({ maxLength: 6 }));
const hostileScalar = fc.oneof(tameScalar, fc.string({ maxLength: 8 }), fc.integer(), fc.double());

function values(key: fc.Arbitrary<string>, scalar: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.letrec((tie) => ({
    node: fc.oneof({ depthSize: 'small' }, scalar, tie('list'), tie('map')),
    list: fc.array(tie('node'), { maxLength: 4 }),
    map: fc.dictionary(key, tie('node'), { maxKeys: 4 }),
  })).node;
}

const styles = fc.record({ flow: fc.boolean(), padding: fc.boolean(), indentSeq: fc.boolean() });

test('generated documents (the library stringify output, block and flow styles): the fast reader agrees', () => {
  for (const [name, arb, min] of [
    ['hostile', values(hostileKey, hostileScalar), 0],
    ['tame', values(tameKey, tameScalar), 1600],
  ] as const) {
    let accepted = 0;
    fc.assert(
      fc.property(arb, styles, (v, st) => {
        const text = stringify(v, {
          flowCollectionPadding: st.padding,
          indentSeq: st.indentSeq,
          collectionStyle: st.flow ? 'flow' : 'any',
        });
        if (agrees(text)) accepted++;
      }),
      { numRuns: 2000 },
    );
    // Much of the tame text must take the fast path, or the comparison proves little.
    assert.ok(accepted >= min, `${name}: only ${accepted} of 2000 accepted`);
  }
  let fast = 0;
  for (let i = 0; i < 200; i++) {
    const v = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `p${i}`, labels: { app: `a${i}` } },
      spec: { containers: [{ name: 'c', ports: [{ containerPort: 80 + i }] }] },
    };
    if (parseSubset(stringify(v)) !== FALLBACK) fast++;
  }
  assert.equal(fast, 200);
});

test('mutated documents (random lines of YAML pieces): accepted only when the library reads the same', () => {
  const piece = fc.constantFrom(
    'a: 1',
    'b:',
    '- x',
    '-',
    '- k: v',
    '  c: 2',
    '    d: [1, 2]',
    '  - y',
    'e: {f: g}',
    'h: "q"',
    "i: 'r'",
    '# c',
    '',
    'a: 2',
    '  - - z',
    'j: x # c',
    'k: - l',
    '  ',
    'm: [',
    'n: }',
    '   o: 3',
    ' - p',
    'q:  r  ',
    'x: {a: 1, a: 2}',
    '"q": 1',
    "'r s': x",
    '"a":1',
    '- "k": v',
    '  "null":',
  );
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 12 }), (lines) => {
      agrees(lines.join('\n'));
    }),
    { numRuns: 3000 },
  );
});

test('documents are split as the library splits the stream; errors keep their line in the file', () => {
  const streams = [
    '',
    '# hi\n',
    '# hi\n---\na: 1\n',
    'a: 1\n---\n',
    '---\na: 1\n',
    'a: 1\n---\n# c\n---\nb: 2\n',
    'a: 1\n---',
    '---\n---\n',
  ];
  for (const s of streams) {
    const docs = splitDocuments(s);
    assert.ok(docs !== undefined, s);
    const lib = parseAllDocuments(s);
    assert.equal(docs.length, Array.isArray(lib) ? lib.length : 0, JSON.stringify(s));
  }
  for (const s of ['%YAML 1.2\n---\na: 1\n', 'a: 1\n...\n', '--- {a: 1}\n', '\uFEFFa: 1\n'])
    assert.equal(splitDocuments(s), undefined, s);

  const objects: unknown[] = [];
  const errors: LoadError[] = [];
  parseManifestText(
    'apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n   bad: [\n',
    'f.yaml',
    objects,
    errors,
  );
  assert.equal(objects.length, 1);
  assert.equal(errors.length, 1);
  assert.equal(errors[0]?.source, 'f.yaml#2');
  // The same position the library gives when it reads the whole stream.
  const whole = parseAllDocuments(
    'apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n   bad: [\n',
  );
  const e = Array.isArray(whole) ? whole[1]?.errors[0] : undefined;
  assert.ok(e?.linePos !== undefined);
  assert.match(
    errors[0]?.message ?? '',
    new RegExp(`^not valid YAML or JSON: line ${e.linePos[0].line}, column ${e.linePos[0].col}: `),
  );
});
