// The cluster-scoped definitions the test API server (fake-apiserver.ts)
// accepts like a real one: CustomResourceDefinitions
// (apiextensions.k8s.io/v1) and ValidatingAdmissionPolicies with their
// bindings (admissionregistration.k8s.io/v1). A create or replace is checked
// with the API server's own rules (crd-validation.ts,
// admission-policy-validation.ts) and refused with 422 Invalid naming every
// field, as kube-apiserver refuses it; accepted objects are stored and served
// (get, list, delete). What they define is not enforced here, except that the
// server installs the custom resource groups it serves when their CRD is
// created (see FakeApiServer).
import { validateAdmissionPolicy, validateAdmissionPolicyBinding } from './admission-policy-validation.ts';
import { validateCustomResourceDefinition } from './crd-validation.ts';
import { invalidStatus, type FieldError } from './field-error.ts';

interface DefinitionKind {
  readonly group: string;
  readonly kind: string;
  readonly validate: (o: unknown) => FieldError[];
}

const KINDS: Readonly<Record<string, DefinitionKind>> = {
  'apiextensions.k8s.io/v1/customresourcedefinitions': {
    group: 'apiextensions.k8s.io',
    kind: 'CustomResourceDefinition',
    validate: validateCustomResourceDefinition,
  },
  'admissionregistration.k8s.io/v1/validatingadmissionpolicies': {
    group: 'admissionregistration.k8s.io',
    kind: 'ValidatingAdmissionPolicy',
    validate: validateAdmissionPolicy,
  },
  'admissionregistration.k8s.io/v1/validatingadmissionpolicybindings': {
    group: 'admissionregistration.k8s.io',
    kind: 'ValidatingAdmissionPolicyBinding',
    validate: validateAdmissionPolicyBinding,
  },
};

export interface DefinitionRoute {
  readonly key: string;
  readonly name: string | undefined;
}

/** `/apis/{group}/v1/{plural}[/{name}]` of a definition kind, else undefined. */
export function definitionRoute(pathname: string): DefinitionRoute | undefined {
  const seg = pathname.split('/').filter((s) => s !== '');
  if (seg[0] !== 'apis' || seg.length < 4 || seg.length > 5) return undefined;
  const key = `${seg[1] ?? ''}/${seg[2] ?? ''}/${seg[3] ?? ''}`;
  return KINDS[key] === undefined ? undefined : { key, name: seg[4] === undefined ? undefined : decodeURIComponent(seg[4]) };
}

export interface DefinitionAnswer {
  readonly code: number;
  readonly body: Record<string, unknown>;
  /** The object stored (201/200 on a write) or removed (DELETE). */
  readonly stored?: Record<string, unknown>;
}

const failure = (code: number, reason: string, message: string): DefinitionAnswer => ({
  code,
  body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code },
});

/** Stored definitions, keyed by route key then name. */
export class DefinitionStore {
  readonly #objects = new Map<string, Map<string, Record<string, unknown>>>();
  #uid = 1;

  #of(key: string): Map<string, Record<string, unknown>> {
    let m = this.#objects.get(key);
    if (m === undefined) this.#objects.set(key, (m = new Map()));
    return m;
  }

  /** Every stored object of a kind ('CustomResourceDefinition', ...). */
  list(kind: string): Record<string, unknown>[] {
    const key = Object.keys(KINDS).find((k) => KINDS[k]?.kind === kind);
    return key === undefined ? [] : [...this.#of(key).values()].map((o) => structuredClone(o));
  }

  /** One API request; `rv` gives the resourceVersion for a write. */
  handle(method: string, route: DefinitionRoute, body: unknown, rv: () => number): DefinitionAnswer {
    const info = KINDS[route.key];
    if (info === undefined) return failure(404, 'NotFound', 'not found');
    const store = this.#of(route.key);
    const plural = route.key.split('/')[2] ?? '';
    const resource = `${plural}.${info.group}`;
    if (method === 'GET' && route.name === undefined)
      return {
        code: 200,
        body: {
          kind: `${info.kind}List`,
          apiVersion: `${info.group}/v1`,
          metadata: { resourceVersion: String(rv()) },
          items: [...store.values()],
        },
      };
    if (method === 'GET' || method === 'DELETE') {
      const o = store.get(route.name ?? '');
      if (o === undefined) return failure(404, 'NotFound', `${resource} "${route.name ?? ''}" not found`);
      if (method === 'DELETE') store.delete(route.name ?? '');
      return { code: 200, body: o, ...(method === 'DELETE' ? { stored: o } : {}) };
    }
    if (method !== 'POST' && method !== 'PUT') return failure(405, 'MethodNotAllowed', `${method} is not supported here`);
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      return failure(400, 'BadRequest', 'the body must be a JSON object');
    const o = structuredClone(body) as Record<string, unknown>;
    const meta = (typeof o.metadata === 'object' && o.metadata !== null ? o.metadata : {}) as Record<string, unknown>;
    const name = typeof meta.name === 'string' ? meta.name : '';
    if (method === 'PUT' && name !== route.name)
      return failure(
        400,
        'BadRequest',
        `the name of the object (${name}) does not match the name on the URL (${route.name ?? ''})`,
      );
    const errors = info.validate(o);
    if (errors.length > 0) return { code: 422, body: invalidStatus(info.group, info.kind, name, errors) };
    const old = store.get(name);
    if (method === 'POST' && old !== undefined) return failure(409, 'AlreadyExists', `${resource} "${name}" already exists`);
    if (method === 'PUT' && old === undefined) return failure(404, 'NotFound', `${resource} "${name}" not found`);
    const oldMeta = (old?.metadata ?? {}) as Record<string, unknown>;
    o.apiVersion = `${info.group}/v1`;
    o.kind = info.kind;
    o.metadata = {
      ...meta,
      uid: oldMeta.uid ?? `def-uid-${this.#uid++}`,
      creationTimestamp: oldMeta.creationTimestamp ?? new Date().toISOString(),
      resourceVersion: String(rv()),
    };
    store.set(name, o);
    return { code: method === 'POST' ? 201 : 200, body: o, stored: o };
  }
}
