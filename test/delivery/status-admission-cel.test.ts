// The optional ValidatingAdmissionPolicy (daemonset/status-admission/) run
// with a real CEL implementation (@marcbachmann/cel-js) on AdmissionRequest-
// shaped inputs, with the admission semantics of Kubernetes around it:
// matchConstraints select the request, matchConditions (all true) apply the
// policy, a validation that is false denies with its message, and an error
// anywhere falls to failurePolicy. `request` is a plain map here, as the API
// server hands CEL the request converted to unstructured: an absent field
// (`extra` of a token without one) is "no such key", which only has() tests.
// The expressions are also type-checked against the request's declared types.
// What this cannot show: a real kube-apiserver (see docs/operations.md).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { Environment } from '@marcbachmann/cel-js';
import { DAEMONSET_DIR, arr, at, parseYamlStream, readText, rec, str } from './support.ts';

const [vap] = parseYamlStream(readText(join(DAEMONSET_DIR, 'status-admission', 'validatingadmissionpolicy.yaml')), 'vap').map(
  (d) => rec(d, 'vap'),
);
const spec = rec(at(vap, 'spec'), 'spec');
const conditions = arr(spec.matchConditions, 'matchConditions').map((c) => rec(c, 'matchCondition'));
const validations = arr(spec.validations, 'validations').map((v) => rec(v, 'validation'));
const rules = arr(at(spec, 'matchConstraints.resourceRules'), 'resourceRules').map((r) => rec(r, 'rule'));

const AGENT = 'system:serviceaccount:nft-netpol-system:nft-netpol-agent';
const NODE_NAME = 'authentication.kubernetes.io/node-name';

interface UserInfo {
  readonly username: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

/**
 * The user info of a projected (pod-bound) service account token on
 * Kubernetes >= 1.30 (ServiceAccountTokenPodNodeInfo and ...JTI on by
 * default): the pod and, since 1.30, the node it is scheduled to.
 */
function podToken(node: string, username = AGENT): UserInfo {
  const ns = username.split(':')[2] ?? '';
  return {
    username,
    uid: '6f1c4a52-3c1e-4f7e-9a55-3b8d7f0e2a11',
    groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
    extra: {
      'authentication.kubernetes.io/credential-id': ['JTI=1d7e6f0c-94a4-4c0b-8f3e-6b5a0f2d9c41'],
      [NODE_NAME]: [node],
      'authentication.kubernetes.io/node-uid': ['0c4f4b7e-8b8a-4d5f-a8f1-5d2f9c3e7b60'],
      'authentication.kubernetes.io/pod-name': [`nft-netpol-agent-${node}`],
      'authentication.kubernetes.io/pod-uid': ['a3f5e0d2-1b7c-4e9a-8c6d-2f4b1e0a9d37'],
    },
  };
}

type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
interface Target {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly kind: string;
  readonly namespace?: string;
}
const STATUS: Target = { group: 'nft-netpol.io', version: 'v1alpha1', resource: 'nodepolicystatuses', kind: 'NodePolicyStatus' };
const LEASE: Target = {
  group: 'coordination.k8s.io',
  version: 'v1',
  resource: 'leases',
  kind: 'Lease',
  namespace: 'nft-netpol-system',
};
const CONFIGMAP: Target = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespace: 'nft-netpol-system' };

/** An AdmissionRequest as the API server builds it (a PATCH is operation UPDATE). */
function request(user: UserInfo, operation: Operation, t: Target, name: string, subResource = ''): Record<string, unknown> {
  const gvr = { group: t.group, version: t.version, resource: t.resource };
  const gvk = { group: t.group, version: t.version, kind: t.kind };
  return {
    uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
    kind: gvk,
    resource: gvr,
    subResource,
    requestKind: gvk,
    requestResource: gvr,
    requestSubResource: subResource,
    name,
    ...(t.namespace === undefined ? {} : { namespace: t.namespace }),
    operation,
    userInfo: user,
    dryRun: false,
  };
}

const env = new Environment().registerVariable('request', 'map');
// The declared type of `request` in Kubernetes' admission CEL environment (the fields used).
const typed = new Environment().registerVariable({
  name: 'request',
  schema: {
    name: 'string',
    namespace: 'string',
    operation: 'string',
    subResource: 'string',
    userInfo: { username: 'string', uid: 'string', groups: 'list<string>', extra: 'map<string, list<string>>' },
  },
});

function matchesConstraints(req: Record<string, unknown>): boolean {
  const resource = rec(req.resource, 'resource');
  const full =
    req.subResource === '' ? str(resource.resource, 'r') : `${str(resource.resource, 'r')}/${str(req.subResource, 's')}`;
  const has = (list: unknown, v: string): boolean => arr(list, 'list').some((x) => x === '*' || x === v);
  return rules.some(
    (r) =>
      has(r.apiGroups, str(resource.group, 'g')) &&
      has(r.apiVersions, str(resource.version, 'v')) &&
      has(r.operations, str(req.operation, 'op')) &&
      has(r.resources, full) &&
      (r.scope === undefined || r.scope === '*' || (r.scope === 'Namespaced') === (req.namespace !== undefined)),
  );
}

type Decision = { readonly allowed: true; readonly applied: boolean } | { readonly allowed: false; readonly message: string };

/** The policy's decision for one request, as the API server's admission plugin makes it. */
function admit(req: Record<string, unknown>): Decision {
  if (!matchesConstraints(req)) return { allowed: true, applied: false };
  const failed = (e: unknown): Decision => {
    assert.equal(spec.failurePolicy, 'Fail');
    return { allowed: false, message: `evaluation error: ${(e as Error).message}` };
  };
  try {
    for (const c of conditions)
      if (env.evaluate(str(c.expression, 'matchCondition'), { request: req }) !== true) return { allowed: true, applied: false };
  } catch (e) {
    return failed(e);
  }
  for (const v of validations) {
    try {
      if (env.evaluate(str(v.expression, 'validation'), { request: req }) === true) continue;
      const m =
        v.messageExpression === undefined
          ? str(v.message, 'message')
          : env.evaluate(str(v.messageExpression, 'm'), { request: req });
      return { allowed: false, message: String(m) };
    } catch (e) {
      return failed(e);
    }
  }
  return { allowed: true, applied: true };
}

test('every expression type-checks against the request type (bool conditions, a string message)', () => {
  for (const c of conditions) assert.deepEqual(typed.check(str(c.expression, 'c')), { valid: true, type: 'bool' });
  for (const v of validations) {
    assert.deepEqual(typed.check(str(v.expression, 'v')), { valid: true, type: 'bool' });
    if (v.messageExpression !== undefined)
      assert.deepEqual(typed.check(str(v.messageExpression, 'm')), { valid: true, type: 'string' });
  }
});

test("the agent writes its own node's status object and Lease: create, update, the status subresource", () => {
  const me = podToken('node-1');
  for (const req of [
    request(me, 'CREATE', STATUS, 'node-1'),
    request(me, 'UPDATE', STATUS, 'node-1'),
    request(me, 'UPDATE', STATUS, 'node-1', 'status'),
    request(me, 'CREATE', LEASE, 'node-1'),
    request(me, 'UPDATE', LEASE, 'node-1'),
  ])
    assert.deepEqual(admit(req), { allowed: true, applied: true }, `${String(req.operation)} ${String(req.subResource)}`);
});

test("the agent is denied another node's objects, with the policy's message", () => {
  const me = podToken('node-1');
  for (const req of [
    request(me, 'CREATE', STATUS, 'node-2'),
    request(me, 'UPDATE', STATUS, 'node-2', 'status'),
    request(me, 'DELETE', STATUS, 'node-2'),
    request(me, 'UPDATE', LEASE, 'node-2'),
    request(me, 'CREATE', LEASE, 'node-2'),
  ])
    assert.deepEqual(admit(req), {
      allowed: false,
      message: 'nft-netpol-agent may only write the objects of its own node, not node-2',
    });
});

test('tokens without the node (legacy Secret tokens, pod tokens before 1.30) are denied cleanly, not by an error', () => {
  const legacy: UserInfo = {
    username: AGENT,
    uid: 'x',
    groups: ['system:serviceaccounts', 'system:serviceaccounts:nft-netpol-system', 'system:authenticated'],
  };
  const before130: UserInfo = {
    ...legacy,
    extra: { 'authentication.kubernetes.io/pod-name': ['p'], 'authentication.kubernetes.io/pod-uid': ['u'] },
  };
  for (const u of [legacy, before130])
    assert.deepEqual(admit(request(u, 'UPDATE', STATUS, 'node-1', 'status')), {
      allowed: false,
      message: 'nft-netpol-agent may only write the objects of its own node, not node-1',
    });
});

test('other users are not matched: administrators, the garbage collector, other service accounts, other resources', () => {
  const admin: UserInfo = { username: 'kubernetes-admin', groups: ['kubeadm:cluster-admins', 'system:authenticated'] };
  const gc = podToken('cp-1', 'system:serviceaccount:kube-system:generic-garbage-collector');
  const other = podToken('node-1', 'system:serviceaccount:nft-netpol-system:default');
  assert.deepEqual(admit(request(admin, 'UPDATE', STATUS, 'node-2', 'status')), { allowed: true, applied: false });
  assert.deepEqual(admit(request(gc, 'DELETE', STATUS, 'node-2')), { allowed: true, applied: false });
  assert.deepEqual(admit(request(other, 'UPDATE', LEASE, 'node-2')), { allowed: true, applied: false });
  // The agent's requests outside the policy's resources (RBAC decides those).
  assert.deepEqual(admit(request(podToken('node-1'), 'UPDATE', CONFIGMAP, 'node-2')), { allowed: true, applied: false });
});
