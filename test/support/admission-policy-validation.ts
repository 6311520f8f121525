// What the API server checks when a ValidatingAdmissionPolicy or its binding
// (admissionregistration.k8s.io/v1) is created, written from the Kubernetes
// source (pkg/apis/admissionregistration/validation/validation.go) after
// defaulting (matchPolicy Equivalent, empty namespace/object selectors,
// scope "*"). CEL expressions are parsed here (@marcbachmann/cel-js); the API
// server also type-checks them, which test/delivery/status-admission-cel.test.ts
// does for the shipped policy.
import { parse as parseCel } from '@marcbachmann/cel-js';
import { FieldPath, duplicate, forbidden, invalid, notSupported, required, type FieldError } from './field-error.ts';

type Node = Record<string, unknown>;
const nodeOr = (v: unknown): Node | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Node) : undefined;
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

const FAILURE_POLICIES = ['Fail', 'Ignore'];
const MATCH_POLICIES = ['Equivalent', 'Exact'];
const OPERATIONS = ['*', 'CONNECT', 'CREATE', 'DELETE', 'UPDATE'];
const SCOPES = ['*', 'Cluster', 'Namespaced'];
const POLICY_REASONS = ['Forbidden', 'Invalid', 'RequestEntityTooLarge', 'Unauthorized'];
const ACTIONS = ['Audit', 'Deny', 'Warn'];
const QUALIFIED_NAME =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const hasNewlines = (s: string): boolean => /[\n\r]/.test(s);

function cel(expression: string, p: FieldPath, value: unknown = expression): FieldError[] {
  try {
    parseCel(expression);
    return [];
  } catch (e) {
    return [invalid(p, value, `compilation failed: ${(e as Error).message.split('\n')[0] ?? ''}`)];
  }
}

function metadataName(o: Node): FieldError[] {
  const name = str(nodeOr(o.metadata)?.name);
  const p = new FieldPath('metadata.name');
  if (name === '') return [required(p, 'name or generateName is required')];
  if (name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) return [invalid(p, name, 'a lowercase RFC 1123 subdomain is required')];
  return [];
}

/** validateRuleWithOperations, with the defaulted scope. */
function rule(r: Node, p: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  const ops = list(r.operations).map(str);
  if (ops.length === 0) errs.push(required(p.child('operations'), ''));
  if (ops.length > 1 && ops.includes('*'))
    errs.push(invalid(p.child('operations'), ops, "if '*' is present, must not specify other operations"));
  ops.forEach((o, i) => {
    if (!OPERATIONS.includes(o)) errs.push(notSupported(p.child('operations').index(i), o, OPERATIONS));
  });
  for (const k of ['apiGroups', 'apiVersions', 'resources']) {
    const xs = list(r[k]).map(str);
    if (xs.length === 0) errs.push(required(p.child(k), ''));
    if (xs.length > 1 && xs.includes('*')) errs.push(invalid(p.child(k), xs, "if '*' is present, must not specify other " + k));
    if (k !== 'apiGroups') xs.forEach((x, i) => x === '' && errs.push(required(p.child(k).index(i), '')));
  }
  const scope = r.scope === undefined ? '*' : str(r.scope);
  if (!SCOPES.includes(scope)) errs.push(notSupported(p.child('scope'), scope, SCOPES));
  return errs;
}

/** Every error the API server reports when this ValidatingAdmissionPolicy is created; [] when accepted. */
export function validateAdmissionPolicy(obj: unknown): FieldError[] {
  const o = nodeOr(obj) ?? {};
  const spec = nodeOr(o.spec) ?? {};
  const sp = new FieldPath('spec');
  const errs = metadataName(o);
  if (spec.failurePolicy !== undefined && !FAILURE_POLICIES.includes(str(spec.failurePolicy)))
    errs.push(notSupported(sp.child('failurePolicy'), spec.failurePolicy, FAILURE_POLICIES));
  const mc = nodeOr(spec.matchConstraints);
  if (mc === undefined) errs.push(required(sp.child('matchConstraints'), ''));
  else {
    const mp = sp.child('matchConstraints');
    if (mc.matchPolicy !== undefined && !MATCH_POLICIES.includes(str(mc.matchPolicy)))
      errs.push(notSupported(mp.child('matchPolicy'), mc.matchPolicy, MATCH_POLICIES));
    for (const k of ['resourceRules', 'excludeResourceRules'] as const)
      list(mc[k]).forEach((r, i) => errs.push(...rule(nodeOr(r) ?? {}, mp.child(k).index(i))));
    if (list(mc.resourceRules).length === 0) errs.push(required(mp.child('resourceRules'), ''));
  }
  const conditions = list(spec.matchConditions).map((c) => nodeOr(c) ?? {});
  if (conditions.length > 64)
    errs.push({ type: 'FieldValueTooMany', field: sp.child('matchConditions').text, detail: 'must have at most 64 items' });
  const names = new Set<string>();
  conditions.forEach((c, i) => {
    const cp = sp.child('matchConditions').index(i);
    const expr = str(c.expression).trim();
    if (expr === '') errs.push(required(cp.child('expression'), ''));
    else errs.push(...cel(expr, cp.child('expression')));
    const name = str(c.name);
    if (name === '') errs.push(required(cp.child('name'), ''));
    else if (name.length > 316 || !QUALIFIED_NAME.test(name))
      errs.push(
        invalid(
          cp.child('name'),
          name,
          "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        ),
      );
    else if (names.has(name)) errs.push(duplicate(cp.child('name'), name));
    names.add(name);
  });
  const validations = list(spec.validations).map((v) => nodeOr(v) ?? {});
  if (validations.length === 0 && list(spec.auditAnnotations).length === 0) {
    errs.push(required(sp.child('validations'), 'validations or auditAnnotations must contain at least one item'));
    errs.push(required(sp.child('auditAnnotations'), 'validations or auditAnnotations must contain at least one item'));
  }
  validations.forEach((v, i) => {
    const vp = sp.child('validations').index(i);
    const expr = str(v.expression);
    if (expr.trim() === '') errs.push(required(vp.child('expression'), 'expression is not specified'));
    else errs.push(...cel(expr, vp.child('expression')));
    const me = str(v.messageExpression);
    if (me !== '' && me.trim() === '') errs.push(invalid(vp.child('messageExpression'), me, 'must be non-empty if specified'));
    else if (me.trim() !== '') errs.push(...cel(me, vp.child('messageExpression')));
    const msg = str(v.message);
    if (msg !== '' && msg.trim() === '') errs.push(invalid(vp.child('message'), msg, 'message must be non-empty if specified'));
    else if (hasNewlines(msg.trim())) errs.push(invalid(vp.child('message'), msg, 'message must not contain line breaks'));
    if (v.reason !== undefined && !POLICY_REASONS.includes(str(v.reason)))
      errs.push(notSupported(vp.child('reason'), v.reason, POLICY_REASONS));
  });
  return errs;
}

/** Every error the API server reports when this ValidatingAdmissionPolicyBinding is created; [] when accepted. */
export function validateAdmissionPolicyBinding(obj: unknown): FieldError[] {
  const o = nodeOr(obj) ?? {};
  const spec = nodeOr(o.spec) ?? {};
  const sp = new FieldPath('spec');
  const errs = metadataName(o);
  if (str(spec.policyName) === '') errs.push(required(sp.child('policyName'), ''));
  const actions = list(spec.validationActions).map(str);
  const ap = sp.child('validationActions');
  const seen = new Set<string>();
  actions.forEach((a, i) => {
    if (!ACTIONS.includes(a)) errs.push(notSupported(ap.index(i), a, ACTIONS));
    if (seen.has(a)) errs.push(duplicate(ap.index(i), a));
    seen.add(a);
  });
  if (seen.has('Deny') && seen.has('Warn'))
    errs.push(
      invalid(
        ap,
        actions,
        'must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)',
      ),
    );
  if (seen.size === 0) errs.push(required(ap, 'at least one validation action is required'));
  const mr = nodeOr(spec.matchResources);
  if (mr !== undefined) {
    const mp = sp.child('matchResources');
    for (const k of ['resourceRules', 'excludeResourceRules'] as const)
      list(mr[k]).forEach((r, i) => errs.push(...rule(nodeOr(r) ?? {}, mp.child(k).index(i))));
  }
  if (spec.paramRef !== undefined && nodeOr(spec.paramRef) === undefined)
    errs.push(forbidden(sp.child('paramRef'), 'must be an object'));
  return errs;
}
