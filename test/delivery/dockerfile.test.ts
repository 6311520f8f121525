// The Dockerfile, linted and its structure checked (test/image/image.test.ts
// builds and runs it): dockerfile-utils (the validator behind the VS Code
// Docker language service, from the npm registry) reports syntax and
// semantic problems with every rule at error severity and must find nothing,
// and its formatter must have nothing to change. Then, on the parsed
// instructions (dockerfile-ast), the project's image rules.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { DockerfileParser, type Instruction } from 'dockerfile-ast';
import * as dockerfileUtils from 'dockerfile-utils';
import { ROOT, at, readYaml, str } from './support.ts';

const TEXT = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const ERROR = dockerfileUtils.ValidationSeverity.ERROR;
const ALL_RULES_AS_ERRORS: dockerfileUtils.ValidatorSettings = {
  deprecatedMaintainer: ERROR,
  directiveCasing: ERROR,
  emptyContinuationLine: ERROR,
  instructionCasing: ERROR,
  instructionCmdMultiple: ERROR,
  instructionEntrypointMultiple: ERROR,
  instructionHealthcheckMultiple: ERROR,
  instructionJSONInSingleQuotes: ERROR,
  instructionWorkdirRelative: ERROR,
};

function lint(text: string): string[] {
  return dockerfileUtils.validate(text, ALL_RULES_AS_ERRORS).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
}

const dockerfile = DockerfileParser.parse(TEXT);
const stages = dockerfile.getFROMs();
/** The instructions of each build stage, in order. */
const stageTemplates = stages.map((f) => dockerfile.getContainingImage(f.getRange().start));
const finalStage = stageTemplates.at(-1) ?? undefined;
const packageVersion = str(
  (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, unknown>).version,
  'version',
);

/** Everything after the keyword, flags included, continuation lines joined. */
const args = (i: Instruction): string => {
  const r = i.getRange();
  const text = TEXT.split('\n')
    .slice(r.start.line, r.end.line + 1)
    .join('\n');
  return text
    .replace(/^\s*\S+\s+/, '')
    .replace(/\\\n\s*/g, '')
    .trim();
};
const runsOf = (stage: number): string[] =>
  (stageTemplates[stage]?.getInstructions() ?? []).filter((i) => i.getKeyword() === 'RUN').map(args);

describe('Dockerfile lint', () => {
  test('dockerfile-utils finds no problem (every rule at error severity)', () => {
    assert.deepEqual(lint(TEXT), []);
  });

  test('the linter does catch problems (self-test)', () => {
    assert.ok(lint(`${TEXT}\ncmd ['run']\n`).length >= 2);
  });

  test('formatted as dockerfile-utils formats it (4-space continuation lines)', () => {
    assert.deepEqual(dockerfileUtils.format(TEXT, { tabSize: 4, insertSpaces: true }), []);
  });

  test('every ${VAR} an instruction uses is declared for its stage', () => {
    for (const ins of dockerfile.getInstructions()) {
      if (ins.getKeyword() === 'FROM') continue;
      const line = ins.getRange().start.line;
      const available = new Set(dockerfile.getAvailableVariables(line));
      for (const v of ins.getVariables())
        assert.ok(available.has(v.getName()), `line ${line + 1}: \${${v.getName()}} is not declared in this stage`);
    }
  });
});

describe('image rules', () => {
  test('multi-stage: build, prod-deps, runtime, all from the pinned Node LTS slim base', () => {
    assert.deepEqual(
      stages.map((f) => f.getBuildStage()),
      ['build', 'prod-deps', null],
    );
    for (const f of stages) assert.equal(f.getImage(), '${NODE_IMAGE}');
    const initial = dockerfile.getInitialARGs().map((a) => [a.getProperty()?.getName(), a.getProperty()?.getValue()]);
    const base = initial.find(([n]) => n === 'NODE_IMAGE')?.[1] ?? '';
    // A full version tag (not latest, not a floating major) on Debian slim.
    assert.match(base, /^node:(\d+)\.\d+\.\d+-(bookworm|trixie)-slim(@sha256:[0-9a-f]{64})?$/);
    const major = Number(/^node:(\d+)/.exec(base)?.[1]);
    assert.equal(major % 2, 0, 'an LTS (even) Node.js major');
    assert.ok(major >= 22, 'the code needs Node.js >= 22.19 (README)');
    assert.match(TEXT, /pin it by\s*\n?#?\s*digest/i, 'the digest-pinning note is there');
  });

  test('build with the lockfile (npm ci), runtime gets only production deps and dist/', () => {
    assert.ok(runsOf(0).some((r) => /^npm ci\b/.test(r) && !r.includes('--omit=dev')));
    assert.ok(runsOf(0).includes('npm run build'));
    assert.ok(runsOf(1).some((r) => /^npm ci --omit=dev\b/.test(r)));
    assert.ok(!/npm install/.test(TEXT), 'npm ci only');
    const copies = (finalStage?.getCOPYs() ?? []).map(args);
    assert.deepEqual(copies, [
      '--from=prod-deps /app/node_modules ./node_modules',
      '--from=build /src/dist ./dist',
      'package.json ./',
      'bin ./bin',
    ]);
  });

  test("runtime: Debian's nftables, conntrack, tcpdump (--log-denied) and tini, no recommends, apt lists cleaned", () => {
    const run = runsOf(2).join('\n');
    assert.match(run, /apt-get install -y --no-install-recommends nftables conntrack tcpdump tini/);
    assert.match(run, /rm -rf \/var\/lib\/apt\/lists\/\*/);
  });

  test('exec-form ENTRYPOINT through tini, CMD run (the DaemonSet args), uid 0 as the DaemonSet, port 9742', () => {
    const ep = finalStage?.getENTRYPOINTs() ?? [];
    assert.equal(ep.length, 1);
    assert.deepEqual(
      ep[0]?.getJSONStrings().map((s) => s.getJSONValue()),
      ['/usr/bin/tini', '--', 'node', '/app/dist/cli/main.js'],
    );
    const cmd = finalStage?.getCMDs() ?? [];
    assert.deepEqual(
      cmd[0]?.getJSONStrings().map((s) => s.getJSONValue()),
      ['run'],
    );
    // The entry point is what `npm run build` emits for src/cli/main.ts (rootDir src, outDir dist).
    const build = JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as {
      compilerOptions: { rootDir: string; outDir: string };
    };
    assert.equal(build.compilerOptions.rootDir, 'src');
    assert.equal(build.compilerOptions.outDir, 'dist');
    assert.ok(existsSync(join(ROOT, 'src', 'cli', 'main.ts')));
    const users = (finalStage?.getInstructions() ?? []).filter((i) => i.getKeyword() === 'USER').map(args);
    assert.deepEqual(users, ['0:0']);
    const ds = readYaml(join(ROOT, 'daemonset', 'daemonset.yaml'));
    assert.equal(at(ds, 'spec.template.spec.containers.0.securityContext.runAsUser'), 0);
    assert.deepEqual(at(ds, 'spec.template.spec.containers.0.args'), ['run']);
    const expose = (finalStage?.getInstructions() ?? []).filter((i) => i.getKeyword() === 'EXPOSE').map(args);
    assert.deepEqual(expose, ['9742']);
  });

  test('OCI labels: source, version from ARG VERSION (default = package.json version)', () => {
    const arg = (finalStage?.getARGs() ?? []).find((a) => a.getProperty()?.getName() === 'VERSION');
    assert.equal(arg?.getProperty()?.getValue(), packageVersion);
    for (const label of ['title', 'source', 'version', 'revision', 'licenses', 'description']) {
      assert.match(TEXT, new RegExp(`org\\.opencontainers\\.image\\.${label}=`), label);
    }
    assert.match(TEXT, /org\.opencontainers\.image\.version="\$\{VERSION\}"/);
  });

  test('the commit reaches the agent: NFTNP_COMMIT from ARG REVISION, in the final stage (no .git in the image)', () => {
    const ins = finalStage?.getInstructions() ?? [];
    const argAt = ins.findIndex((i) => i.getKeyword() === 'ARG' && args(i).startsWith('REVISION'));
    const envAt = ins.findIndex((i) => i.getKeyword() === 'ENV' && /\bNFTNP_COMMIT=\$\{REVISION\}/.test(args(i)));
    assert.ok(argAt >= 0, 'ARG REVISION in the final stage');
    assert.ok(envAt > argAt, 'ENV NFTNP_COMMIT=${REVISION} after it');
  });

  test('.dockerignore: an allow-list that lets in exactly what the Dockerfile copies', () => {
    const lines = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    assert.equal(lines[0], '*', 'everything excluded first');
    const allowed = lines.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, ''));
    const copied = (dockerfile.getInstructions() ?? [])
      .filter((i) => i.getKeyword() === 'COPY' && !args(i).startsWith('--from='))
      .flatMap((i) => args(i).split(/\s+/).slice(0, -1));
    assert.deepEqual([...new Set(copied)].sort(), [...allowed].sort());
    for (const f of allowed) assert.ok(existsSync(join(ROOT, f)), `${f} exists`);
  });
});
