// What the API server checks when a CustomResourceDefinition
// (apiextensions.k8s.io/v1) is created, written from the Kubernetes source
// (staging/src/k8s.io/apiextensions-apiserver):
//   - pkg/apiserver/schema/validation.go, complete.go: the structural schema
//     (a type on every node except under x-kubernetes-int-or-string or
//     x-kubernetes-preserve-unknown-fields; nothing but value validations
//     inside allOf/anyOf/oneOf/not; metadata restricted to name and
//     generateName; no additionalProperties at the root; everything that a
//     value validation names also specified outside it);
//   - pkg/apis/apiextensions/validation/validation.go: the OpenAPI subset
//     (no $ref, patternProperties, uniqueItems...; properties and
//     additionalProperties are mutually exclusive; list/map types), names,
//     versions, printer columns, x-kubernetes-validations rules (parsed as
//     CEL here, and their cost bounded from below: under a list without
//     maxItems a rule runs up to ~1M times per object, and the API server
//     refuses a rule whose estimated cost exceeds 10M; the API server also
//     type-checks them, which this does not);
//   - pkg/apiserver/schema/defaulting/validation.go: defaults valid against
//     their schema, pruned, and none in metadata.
// Error paths and texts are the API server's. A v1 CRD whose versions all
// carry the same schema is reported at `spec.validation.openAPIV3Schema` (the
// internal form hoists identical per-version schemas), otherwise at
// `spec.versions[i].schema.openAPIV3Schema`.
//
// Used by the test over every CRD under daemonset/ and by the test API server
// (test/support/fake-apiserver.ts), which answers 422 Invalid like the real one.
import { isDeepStrictEqual } from 'node:util';
import { parse as parseCel } from '@marcbachmann/cel-js';
import { FieldPath, forbidden, invalid, notSupported, required, type FieldError } from './field-error.ts';

type Node = Record<string, unknown>;

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);
const nodeOr = (v: unknown): Node | undefined => (isNode(v) ? v : undefined);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

const OPENAPI_TYPES = ['array', 'boolean', 'integer', 'number', 'object', 'string'];
const JUNCTORS = ['allOf', 'anyOf', 'oneOf'] as const;
type Level = 'root' | 'item' | 'field';

/**
 * A pattern (Go RE2 syntax) as a JavaScript RegExp: a leading inline flag
 * group (`(?i)`, `(?s)`), which RE2 has and JavaScript lacks, becomes a flag.
 * Throws when it does not compile either way.
 */
function goRegExp(pattern: string): RegExp {
  const m = /^\(\?([imsU]+)\)/.exec(pattern);
  const flags = (m?.[1] ?? '').replace(/[^ims]/g, '');
  return new RegExp(m === null ? pattern : pattern.slice(m[0].length), flags);
}

/** Is `s` exactly `anyOf: [{type: integer}, {type: string}]` (the IntOrString exception)? */
function isIntOrStringAnyOf(anyOf: unknown): boolean {
  return isDeepStrictEqual(anyOf, [{ type: 'integer' }, { type: 'string' }]);
}

// ------------------------------------------------------------ structural schema

/** validateNestedValueValidation: under a junctor only value validations may appear. */
function nestedValueValidation(v: Node | undefined, skipAnyOf: boolean, skipAllOfAnyOf: boolean, p: FieldPath): FieldError[] {
  if (v === undefined) return [];
  const errs = valueValidation(v, skipAnyOf, skipAllOfAnyOf, p);
  errs.push(...nestedValueValidation(nodeOr(v.items), false, false, p.child('items')));
  for (const [k, f] of Object.entries(nodeOr(v.properties) ?? {}))
    errs.push(...nestedValueValidation(nodeOr(f), false, false, p.child('properties').key(k)));
  if (str(v.type) !== '') errs.push(forbidden(p.child('type'), 'must be empty to be structural'));
  if (v.additionalProperties !== undefined)
    errs.push(forbidden(p.child('additionalProperties'), 'must be undefined to be structural'));
  if (v.default !== undefined) errs.push(forbidden(p.child('default'), 'must be undefined to be structural'));
  if (str(v.title) !== '') errs.push(forbidden(p.child('title'), 'must be empty to be structural'));
  if (str(v.description) !== '') errs.push(forbidden(p.child('description'), 'must be empty to be structural'));
  if (v.nullable === true) errs.push(forbidden(p.child('nullable'), 'must be false to be structural'));
  if (v.externalDocs !== undefined) errs.push(forbidden(p.child('externalDocs'), 'must be undefined to be structural'));
  for (const x of ['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-embedded-resource', 'x-kubernetes-int-or-string'])
    if (v[x] === true) errs.push(forbidden(p.child(x), 'must be false to be structural'));
  if (list(v['x-kubernetes-list-map-keys']).length > 0)
    errs.push(forbidden(p.child('x-kubernetes-list-map-keys'), 'must be empty to be structural'));
  for (const x of ['x-kubernetes-list-type', 'x-kubernetes-map-type'])
    if (v[x] !== undefined) errs.push(forbidden(p.child(x), 'must be undefined to be structural'));
  if (list(v['x-kubernetes-validations']).length > 0)
    errs.push(forbidden(p.child('x-kubernetes-validations'), 'must be empty to be structural'));
  if (nodeOr(v.properties)?.metadata !== undefined)
    errs.push(forbidden(p.child('properties').key('metadata'), 'must not be specified in a nested context'));
  return errs;
}

/** validateValueValidation: the junctors of a node (anyOf skipped for the IntOrString patterns). */
function valueValidation(v: Node, skipAnyOf: boolean, skipFirstAllOfAnyOf: boolean, p: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (!skipAnyOf)
    list(v.anyOf).forEach((x, i) => errs.push(...nestedValueValidation(nodeOr(x), false, false, p.child('anyOf').index(i))));
  list(v.allOf).forEach((x, i) =>
    errs.push(...nestedValueValidation(nodeOr(x), skipFirstAllOfAnyOf && i === 0, false, p.child('allOf').index(i))),
  );
  list(v.oneOf).forEach((x, i) => errs.push(...nestedValueValidation(nodeOr(x), false, false, p.child('oneOf').index(i))));
  errs.push(...nestedValueValidation(nodeOr(v.not), false, false, p.child('not')));
  if (typeof v.pattern === 'string' && v.pattern !== '') {
    try {
      goRegExp(v.pattern);
    } catch (e) {
      errs.push(invalid(p.child('pattern'), v.pattern, `must be a valid regular expression, but isn't: ${(e as Error).message}`));
    }
  }
  return errs;
}

/** metadata may restrict name and generateName only (validateStructuralMetadataInvariants). */
function metadataInvariants(s: Node, checkMetadata: boolean, lvl: Level, p: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (checkMetadata && s.type !== 'object') errs.push(invalid(p.child('type'), str(s.type), 'must be object'));
  if (lvl === 'root') {
    const rest: Node = { ...s };
    const props = Object.keys(nodeOr(s.properties) ?? {});
    if (props.length > 0 && props.every((k) => k === 'name' || k === 'generateName')) delete rest.properties;
    delete rest.type;
    delete rest.default; // checked with the defaults
    if (Object.keys(rest).length > 0)
      errs.push(forbidden(p, 'must not specify anything other than name and generateName, but metadata is implicitly specified'));
  }
  return errs;
}

/** validateStructuralInvariants. */
function structuralInvariants(s: Node | undefined, lvl: Level, p: FieldPath): FieldError[] {
  if (s === undefined) return [];
  const errs: FieldError[] = [];
  const type = str(s.type);
  if (type === 'array' && s.items === undefined) errs.push(required(p.child('items'), 'must be specified'));
  errs.push(...structuralInvariants(nodeOr(s.items), 'item', p.child('items')));
  for (const [k, f] of Object.entries(nodeOr(s.properties) ?? {}))
    errs.push(...structuralInvariants(nodeOr(f), 'field', p.child('properties').key(k)));
  if (s.additionalProperties !== undefined) {
    if (lvl === 'root') errs.push(forbidden(p.child('additionalProperties'), 'must not be used at the root'));
    errs.push(...structuralInvariants(nodeOr(s.additionalProperties), 'field', p.child('additionalProperties')));
  }
  const intOrString = s['x-kubernetes-int-or-string'] === true;
  const preserve = s['x-kubernetes-preserve-unknown-fields'] === true;
  const embedded = s['x-kubernetes-embedded-resource'] === true;
  if (intOrString && preserve)
    errs.push(
      invalid(p.child('x-kubernetes-preserve-unknown-fields'), true, 'must be false if x-kubernetes-int-or-string is true'),
    );
  if (intOrString && embedded)
    errs.push(invalid(p.child('x-kubernetes-embedded-resource'), true, 'must be false if x-kubernetes-int-or-string is true'));
  const skipAnyOf = isIntOrStringAnyOf(s.anyOf);
  const skipFirstAllOfAnyOf = isIntOrStringAnyOf(nodeOr(list(s.allOf)[0])?.anyOf);
  errs.push(...valueValidation(s, skipAnyOf, skipFirstAllOfAnyOf, p));
  const checkMetadata = lvl === 'root' || embedded;
  if (embedded && type !== 'object') {
    if (type === '') errs.push(required(p.child('type'), 'must be object if x-kubernetes-embedded-resource is true'));
    else errs.push(invalid(p.child('type'), type, 'must be object if x-kubernetes-embedded-resource is true'));
  } else if (type === '' && !intOrString && !preserve) {
    const where = { root: 'at the root', item: 'for specified array items', field: 'for specified object fields' }[lvl];
    errs.push(required(p.child('type'), `must not be empty ${where}`));
  }
  if (embedded && s.additionalProperties !== undefined)
    errs.push(forbidden(p.child('additionalProperties'), 'must not be used if x-kubernetes-embedded-resource is set'));
  if (lvl === 'root' && type !== '' && type !== 'object') errs.push(invalid(p.child('type'), type, 'must be object at the root'));
  const props = nodeOr(s.properties) ?? {};
  for (const k of ['kind', 'apiVersion']) {
    const f = nodeOr(props[k]);
    if (f !== undefined && checkMetadata && f.type !== 'string')
      errs.push(invalid(p.child('properties').key(k).child('type'), str(f.type), 'must be string'));
  }
  const meta = nodeOr(props.metadata);
  if (meta !== undefined) errs.push(...metadataInvariants(meta, checkMetadata, lvl, p.child('properties').key('metadata')));
  if (embedded && !preserve && Object.keys(props).length === 0)
    errs.push(
      required(
        p.child('properties'),
        'must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields',
      ),
    );
  return errs;
}

/** complete.go: what a value validation names under the root must exist outside it. */
function completeness(v: Node | undefined, s: Node | undefined, sPath: FieldPath, vPath: FieldPath): FieldError[] {
  if (v === undefined) return [];
  if (s === undefined) return [required(sPath, `because it is defined in ${vPath.text}`)];
  const errs = nestedCompleteness(nodeOr(v.not), s, sPath, vPath.child('not'));
  for (const j of ['allOf', 'anyOf', 'oneOf'] as const)
    list(v[j]).forEach((x, i) => errs.push(...nestedCompleteness(nodeOr(x), s, sPath, vPath.child(j).index(i))));
  return errs;
}

function nestedCompleteness(v: Node | undefined, s: Node | undefined, sPath: FieldPath, vPath: FieldPath): FieldError[] {
  if (v === undefined) return [];
  if (s === undefined) return [required(sPath, `because it is defined in ${vPath.text}`)];
  const errs = completeness(v, s, sPath, vPath);
  if (v.items !== undefined)
    errs.push(...nestedCompleteness(nodeOr(v.items), nodeOr(s.items), sPath.child('items'), vPath.child('items')));
  for (const [k, f] of Object.entries(nodeOr(v.properties) ?? {})) {
    const sf = nodeOr(nodeOr(s.properties)?.[k]);
    if (sf === undefined)
      errs.push(required(sPath.child('properties').key(k), `because it is defined in ${vPath.child('properties').key(k).text}`));
    else errs.push(...nestedCompleteness(nodeOr(f), sf, sPath.child('properties').key(k), vPath.child('properties').key(k)));
  }
  return errs;
}

/** ValidateStructural: sorted by text, as the API server sorts them. */
export function validateStructural(schema: Node, p: FieldPath): FieldError[] {
  const errs = [...structuralInvariants(schema, 'root', p), ...completeness(schema, schema, p, p)];
  const text = (e: FieldError): string => `${e.field}: ${e.type} ${e.detail}`;
  return errs.sort((a, b) => (text(a) < text(b) ? -1 : text(a) > text(b) ? 1 : 0));
}

// ------------------------------------------------------------ the OpenAPI subset

const ROOT_FIELDS_WITH_STATUS = new Set([
  'description',
  'type',
  'format',
  'title',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'uniqueItems',
  'multipleOf',
  'required',
  'items',
  'properties',
  'externalDocs',
  'example',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-validations',
]);

const VALIDATION_REASONS = ['FieldValueDuplicate', 'FieldValueForbidden', 'FieldValueInvalid', 'FieldValueRequired'];

interface OpenApiCtx {
  /** Why defaults are forbidden here (undefined: allowed). */
  readonly noDefaults: string | undefined;
  readonly insideMeta: boolean;
  /**
   * How many times this node can occur in one object: the product of the
   * maxItems/maxProperties above it (cel_validation.go, MaxCardinality);
   * undefined when a list or map above it is unbounded.
   */
  readonly cardinality: number | undefined;
}

// ---- CEL cost (a lower bound of the API server's static estimate)

/** Per rule, x its cardinality (StaticEstimatedCostLimit). */
const RULE_COST_LIMIT = 10_000_000;
/** celconfig.MaxRequestSizeBytes. */
const MAX_REQUEST_BYTES = 3 * 1024 * 1024;

/** The factor by which a node multiplies the cardinality of its children (extractMaxElements); undefined: unbounded. */
function maxElements(s: Node): number | undefined {
  if (s.type === 'object')
    return s.additionalProperties === undefined ? 1 : typeof s.maxProperties === 'number' ? s.maxProperties : undefined;
  if (s.type === 'array') return typeof s.maxItems === 'number' ? s.maxItems : undefined;
  return 1;
}

const childCardinality = (parent: Node, c: number | undefined): number | undefined => {
  const m = maxElements(parent);
  return c === undefined || m === undefined ? undefined : c * m;
};

/** The smallest JSON a value of this node serializes to (DeclType.MinSerializedSize): `{}`, `[]`, `""`, `0`, `true`. */
function minSerializedSize(s: Node): number {
  if (s['x-kubernetes-int-or-string'] === true) return 2;
  return s.type === 'boolean' ? 4 : s.type === 'integer' || s.type === 'number' ? 1 : 2;
}

/**
 * A lower bound of CEL's static cost of one evaluation: every identifier of
 * the object (self, oldSelf) and every field selection costs 1 in CEL's
 * estimator (common.SelectAndIdentCost); operators, calls and comprehensions
 * only add to that.
 */
function costLowerBound(ast: unknown): number {
  if (Array.isArray(ast)) return ast.reduce((n: number, x) => n + costLowerBound(x), 0);
  if (!isNode(ast)) return 0;
  const own = ast.op === '.' || ast.op === '.?' || (ast.op === 'id' && (ast.args === 'self' || ast.args === 'oldSelf')) ? 1 : 0;
  return own + costLowerBound(ast.args);
}

function costFactor(cost: number): string {
  const f = cost / RULE_COST_LIMIT;
  return f > 100 ? 'more than 100x' : f < 1.5 ? `${f.toFixed(6)}x` : `${f.toFixed(1)}x`;
}

function celRules(s: Node, p: FieldPath, cardinality: number | undefined): FieldError[] {
  const errs: FieldError[] = [];
  list(s['x-kubernetes-validations']).forEach((r, i) => {
    const rp = p.child('x-kubernetes-validations').index(i);
    const rule = nodeOr(r) ?? {};
    const text = str(rule.rule).trim();
    const message = str(rule.message);
    if (text === '') errs.push(required(rp.child('rule'), 'rule is not specified'));
    else if (message !== '' && message.trim() === '')
      errs.push(invalid(rp.child('message'), message, 'message must be non-empty if specified'));
    else if (/[\n\r]/.test(message.trim()))
      errs.push(invalid(rp.child('message'), message, 'message must not contain line breaks'));
    else if (/[\n\r]/.test(text) && message.trim() === '')
      errs.push(required(rp.child('message'), 'message must be specified if rule contains line breaks'));
    if (rule.reason !== undefined && !VALIDATION_REASONS.includes(str(rule.reason)))
      errs.push(notSupported(rp.child('reason'), rule.reason, VALIDATION_REASONS));
    if (text !== '') {
      try {
        // Under an unbounded list or map the rule may run once per MaxRequestSizeBytes / (its node's size + 1).
        const times = cardinality ?? Math.floor(MAX_REQUEST_BYTES / (minSerializedSize(s) + 1));
        const cost = costLowerBound(parseCel(text).ast) * times;
        if (cost > RULE_COST_LIMIT)
          errs.push(
            forbidden(
              rp.child('rule'),
              `estimated rule cost exceeds budget by factor of ${costFactor(cost)} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
            ),
          );
      } catch (e) {
        errs.push(invalid(rp.child('rule'), rule, `compilation failed: ${(e as Error).message.split('\n')[0] ?? ''}`));
      }
    }
  });
  return errs;
}

/** ValidateCustomResourceDefinitionOpenAPISchema (with specStandardValidatorV3). */
function openApiSchema(s: Node | undefined, p: FieldPath, ctx: OpenApiCtx, isRoot: boolean): FieldError[] {
  if (s === undefined) return [];
  const errs: FieldError[] = [];
  const type = str(s.type);
  if (type !== '' && !OPENAPI_TYPES.includes(type)) errs.push(notSupported(p.child('type'), type, OPENAPI_TYPES));
  if (s.default !== undefined && ctx.noDefaults !== undefined)
    errs.push(forbidden(p.child('default'), `must not be set ${ctx.noDefaults}`));
  if (s.id !== undefined) errs.push(forbidden(p.child('id'), 'id is not supported'));
  if (s.additionalItems !== undefined) errs.push(forbidden(p.child('additionalItems'), 'additionalItems is not supported'));
  if (s.patternProperties !== undefined) errs.push(forbidden(p.child('patternProperties'), 'patternProperties is not supported'));
  if (s.definitions !== undefined) errs.push(forbidden(p.child('definitions'), 'definitions is not supported'));
  if (s.dependencies !== undefined) errs.push(forbidden(p.child('dependencies'), 'dependencies is not supported'));
  if (s.$ref !== undefined) errs.push(forbidden(p.child('$ref'), '$ref is not supported'));
  if (s.type === 'null') errs.push(forbidden(p.child('type'), 'type cannot be set to null, use nullable as an alternative'));
  if (Array.isArray(s.items)) errs.push(forbidden(p.child('items'), 'items must be a schema object and not an array'));
  if (ctx.insideMeta && s['x-kubernetes-embedded-resource'] === true)
    errs.push(forbidden(p.child('x-kubernetes-embedded-resource'), 'must not be used inside of resource meta'));
  if (s.uniqueItems === true)
    errs.push(
      forbidden(p.child('uniqueItems'), 'uniqueItems cannot be set to true since the runtime complexity becomes quadratic'),
    );
  const props = nodeOr(s.properties) ?? {};
  if (s.additionalProperties !== undefined) {
    if (Object.keys(props).length > 0 && s.additionalProperties !== true)
      errs.push(forbidden(p.child('additionalProperties'), 'additionalProperties and properties are mutual exclusive'));
    const sub = {
      ...ctx,
      ...(ctx.insideMeta ? { noDefaults: 'inside additionalProperties applying to object metadata' } : {}),
      cardinality: childCardinality(s, ctx.cardinality),
    };
    errs.push(...openApiSchema(nodeOr(s.additionalProperties), p.child('additionalProperties'), sub, false));
  }
  for (const [k, f] of Object.entries(props)) {
    let sub: OpenApiCtx = { ...ctx, cardinality: childCardinality(s, ctx.cardinality) };
    if ((isRoot || s['x-kubernetes-embedded-resource'] === true) && ['metadata', 'kind', 'apiVersion'].includes(k)) {
      sub = { ...sub, insideMeta: true };
      if (isRoot) sub = { ...sub, noDefaults: `in top-level ${k}` };
    }
    errs.push(...openApiSchema(nodeOr(f), p.child('properties').key(k), sub, false));
  }
  errs.push(...openApiSchema(nodeOr(s.not), p.child('not'), ctx, false));
  for (const j of JUNCTORS) list(s[j]).forEach((x, i) => errs.push(...openApiSchema(nodeOr(x), p.child(j).index(i), ctx, false)));
  errs.push(
    ...openApiSchema(nodeOr(s.items), p.child('items'), { ...ctx, cardinality: childCardinality(s, ctx.cardinality) }, false),
  );
  if (s['x-kubernetes-preserve-unknown-fields'] === false)
    errs.push(invalid(p.child('x-kubernetes-preserve-unknown-fields'), false, 'must be true or undefined'));
  const mapType = s['x-kubernetes-map-type'];
  if (mapType !== undefined && type !== 'object')
    errs.push(
      type === ''
        ? required(p.child('type'), 'must be object if x-kubernetes-map-type is specified')
        : invalid(p.child('type'), type, 'must be object if x-kubernetes-map-type is specified'),
    );
  if (mapType !== undefined && mapType !== 'atomic' && mapType !== 'granular')
    errs.push(notSupported(p.child('x-kubernetes-map-type'), mapType, ['atomic', 'granular']));
  const listType = s['x-kubernetes-list-type'];
  if (listType !== undefined && type !== 'array')
    errs.push(
      type === ''
        ? required(p.child('type'), 'must be array if x-kubernetes-list-type is specified')
        : invalid(p.child('type'), type, 'must be array if x-kubernetes-list-type is specified'),
    );
  if (listType !== undefined && !['atomic', 'set', 'map'].includes(str(listType)))
    errs.push(notSupported(p.child('x-kubernetes-list-type'), listType, ['atomic', 'set', 'map']));
  const keys = list(s['x-kubernetes-list-map-keys']).map(str);
  if (keys.length > 0 && listType !== 'map')
    errs.push(
      listType === undefined
        ? required(p.child('x-kubernetes-list-type'), 'must be map if x-kubernetes-list-map-keys is non-empty')
        : invalid(p.child('x-kubernetes-list-type'), listType, 'must be map if x-kubernetes-list-map-keys is non-empty'),
    );
  if (listType === 'map') {
    const items = nodeOr(s.items);
    if (keys.length === 0)
      errs.push(required(p.child('x-kubernetes-list-map-keys'), 'must not be empty if x-kubernetes-list-type is map'));
    if (items === undefined) errs.push(required(p.child('items'), 'must have a schema if x-kubernetes-list-type is map'));
    else if (items.type !== 'object')
      errs.push(
        invalid(p.child('items').child('type'), items.type, "must be object if parent array's x-kubernetes-list-type is map"),
      );
    else {
      const req = new Set(list(items.required).map(str));
      for (const k of keys) {
        const f = nodeOr(nodeOr(items.properties)?.[k]);
        if (f === undefined) {
          errs.push(invalid(p.child('x-kubernetes-list-map-keys'), keys, 'entries must all be names of item properties'));
          continue;
        }
        if (!req.has(k) && f.default === undefined)
          errs.push(
            required(
              p.child('items').child('properties').key(k).child('default'),
              'this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property',
            ),
          );
      }
    }
  }
  errs.push(...celRules(s, p, ctx.cardinality));
  return errs;
}

// ------------------------------------------------------------ defaults

/** Does `value` match; an uncompilable pattern is reported where it is declared, not here. */
function safeTest(pattern: string, value: string): boolean {
  try {
    return goRegExp(pattern).test(value);
  } catch {
    return true;
  }
}

/** The value checks of the schema validator, enough for default values. */
export function valueErrors(s: Node, value: unknown, where: string): string[] {
  if (value === null) return s.nullable === true ? [] : [`${where} in body must be of type ${str(s.type) || 'any'}: "null"`];
  const errs: string[] = [];
  const kind = Array.isArray(value)
    ? 'array'
    : typeof value === 'number'
      ? Number.isInteger(value)
        ? 'integer'
        : 'number'
      : typeof value === 'object'
        ? 'object'
        : typeof value;
  const type = str(s.type);
  const ok =
    s['x-kubernetes-int-or-string'] === true
      ? kind === 'integer' || kind === 'string'
      : type === '' || type === kind || (type === 'number' && kind === 'integer');
  if (!ok) return [`${where} in body must be of type ${type || 'integer or string'}: "${kind}"`];
  if (Array.isArray(s.enum) && !s.enum.some((e) => isDeepStrictEqual(e, value)))
    errs.push(`${where} in body should be one of ${JSON.stringify(s.enum)}`);
  if (typeof value === 'number') {
    if (typeof s.minimum === 'number' && value < s.minimum)
      errs.push(`${where} in body should be greater than or equal to ${s.minimum}`);
    if (typeof s.maximum === 'number' && value > s.maximum)
      errs.push(`${where} in body should be less than or equal to ${s.maximum}`);
  }
  if (typeof value === 'string') {
    const n = [...value].length;
    if (typeof s.minLength === 'number' && n < s.minLength)
      errs.push(`${where} in body should be at least ${s.minLength} chars long`);
    if (typeof s.maxLength === 'number' && n > s.maxLength) errs.push(`${where} in body may not be longer than ${s.maxLength}`);
    if (typeof s.pattern === 'string' && !safeTest(s.pattern, value)) errs.push(`${where} in body should match '${s.pattern}'`);
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === 'number' && value.length < s.minItems)
      errs.push(`${where} in body should have at least ${s.minItems} items`);
    if (typeof s.maxItems === 'number' && value.length > s.maxItems)
      errs.push(`${where} in body should have at most ${s.maxItems} items`);
    const items = nodeOr(s.items);
    if (items !== undefined) value.forEach((x, i) => errs.push(...valueErrors(items, x, `${where}[${i}]`)));
  }
  if (isNode(value)) {
    for (const r of list(s.required).map(str)) if (!(r in value)) errs.push(`${where}.${r} in body is required`);
    const props = nodeOr(s.properties) ?? {};
    const extra = nodeOr(s.additionalProperties);
    for (const [k, x] of Object.entries(value)) {
      const f = nodeOr(props[k]) ?? extra;
      if (f !== undefined) errs.push(...valueErrors(f, x, `${where}.${k}`));
    }
  }
  for (const j of ['allOf', 'anyOf', 'oneOf'] as const) {
    const subs = list(s[j]).map((x) => nodeOr(x) ?? {});
    if (subs.length === 0) continue;
    const passing = subs.filter((x) => valueErrors(x, value, where).length === 0).length;
    if (j === 'allOf' && passing < subs.length) errs.push(`${where} in body must match all schemas (allOf)`);
    if (j === 'anyOf' && passing === 0) errs.push(`${where} in body must match at least one schema (anyOf)`);
    if (j === 'oneOf' && passing !== 1) errs.push(`${where} in body must match exactly one schema (oneOf)`);
  }
  const not = nodeOr(s.not);
  if (not !== undefined && valueErrors(not, value, where).length === 0)
    errs.push(`${where} in body must not validate the schema (not)`);
  return errs;
}

/** Fields of `value` the schema does not know (what pruning would drop). */
function unknownFields(s: Node, value: unknown): boolean {
  if (s['x-kubernetes-preserve-unknown-fields'] === true) return false;
  if (Array.isArray(value)) {
    const items = nodeOr(s.items);
    return items !== undefined && value.some((x) => unknownFields(items, x));
  }
  if (!isNode(value)) return false;
  const props = nodeOr(s.properties) ?? {};
  const extra = nodeOr(s.additionalProperties);
  for (const [k, x] of Object.entries(value)) {
    const f = nodeOr(props[k]) ?? extra;
    if (f === undefined) {
      if (s.additionalProperties === true) continue;
      return true;
    }
    if (unknownFields(f, x)) return true;
  }
  return false;
}

/** defaulting.ValidateDefaults (items and properties; never additionalProperties, where defaults are forbidden). */
function defaults(s: Node | undefined, p: FieldPath): FieldError[] {
  if (s === undefined) return [];
  const errs: FieldError[] = [];
  if (s.default !== undefined) {
    if (unknownFields(s, s.default)) errs.push(invalid(p.child('default'), s.default, 'must not have unknown fields'));
    for (const m of valueErrors(s, s.default, p.child('default').text)) errs.push(invalid(p.child('default'), s.default, m));
  }
  errs.push(...defaults(nodeOr(s.items), p.child('items')));
  for (const [k, f] of Object.entries(nodeOr(s.properties) ?? {}))
    errs.push(...defaults(nodeOr(f), p.child('properties').key(k)));
  return errs;
}

// ------------------------------------------------------------ the CRD

const DNS1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_MSG =
  "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const PRINTER_TYPES = ['boolean', 'date', 'integer', 'number', 'string'];
const PRINTER_FORMATS = ['byte', 'date', 'date-time', 'double', 'float', 'int32', 'int64', 'password'];

function dns1035(p: FieldPath, v: string, lower = false): FieldError[] {
  const x = lower ? v.toLowerCase() : v;
  if (x.length <= 63 && DNS1035.test(x)) return [];
  return [invalid(p, v, lower ? `may have mixed case, but should otherwise match: ${DNS1035_MSG}` : DNS1035_MSG)];
}

function names(n: Node, p: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  for (const k of ['plural', 'singular', 'kind', 'listKind']) if (str(n[k]) === '') errs.push(required(p.child(k), ''));
  for (const k of ['plural', 'singular']) if (str(n[k]) !== '') errs.push(...dns1035(p.child(k), str(n[k])));
  for (const k of ['kind', 'listKind']) if (str(n[k]) !== '') errs.push(...dns1035(p.child(k), str(n[k]), true));
  list(n.shortNames).forEach((x, i) => errs.push(...dns1035(p.child('shortNames').index(i), str(x))));
  if (str(n.kind) !== '' && n.kind === n.listKind)
    errs.push(invalid(p.child('listKind'), n.listKind, 'kind and listKind may not be the same'));
  list(n.categories).forEach((x, i) => errs.push(...dns1035(p.child('categories').index(i), str(x))));
  return errs;
}

function printerColumns(cols: unknown, p: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  list(cols).forEach((c, i) => {
    const col = nodeOr(c) ?? {};
    const cp = p.index(i);
    if (str(col.name) === '') errs.push(required(cp.child('name'), ''));
    const t = str(col.type);
    if (t === '') errs.push(required(cp.child('type'), `must be one of ${PRINTER_TYPES.join(',')}`));
    else if (!PRINTER_TYPES.includes(t)) errs.push(invalid(cp.child('type'), t, `must be one of ${PRINTER_TYPES.join(',')}`));
    if (str(col.format) !== '' && !PRINTER_FORMATS.includes(str(col.format)))
      errs.push(invalid(cp.child('format'), col.format, `must be one of ${PRINTER_FORMATS.join(',')}`));
    const jp = str(col.jsonPath);
    if (jp === '') errs.push(required(cp.child('JSONPath'), ''));
    else if (!jp.startsWith('.')) errs.push(invalid(cp.child('JSONPath'), jp, 'must be a simple json path starting with .'));
  });
  return errs;
}

/** validateCustomResourceDefinitionValidation for one schema (at its internal path). */
function schemaErrors(schema: Node, statusEnabled: boolean, p: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (statusEnabled) {
    if (schema.type !== undefined && schema.type !== 'object')
      errs.push(
        invalid(
          p.child('openAPIV3Schema.type'),
          schema.type,
          'only "object" is allowed as the type at the root of the schema if the status subresource is enabled',
        ),
      );
    const extra = Object.keys(schema).filter((k) => k !== 'type' && !ROOT_FIELDS_WITH_STATUS.has(k));
    if (extra.length > 0)
      errs.push(
        invalid(
          p.child('openAPIV3Schema'),
          extra,
          'only Description, Type, Format, Title, Maximum, ExclusiveMaximum, Minimum, ExclusiveMinimum, MaxLength, MinLength, Pattern, MaxItems, MinItems, UniqueItems, MultipleOf, Required, Items, Properties, ExternalDocs, Example, XPreserveUnknownFields, XValidations fields are allowed at the root of the schema if the status subresource is enabled',
        ),
      );
  }
  if (schema.nullable === true) errs.push(forbidden(p.child('openAPIV3Schema.nullable'), 'nullable cannot be true at the root'));
  const sp = p.child('openAPIV3Schema');
  const structural = validateStructural(schema, sp);
  errs.push(...structural);
  if (structural.length === 0) errs.push(...defaults(schema, sp));
  errs.push(...openApiSchema(schema, sp, { noDefaults: undefined, insideMeta: false, cardinality: 1 }, true));
  return errs;
}

/**
 * Every error the API server reports when this CRD (apiextensions.k8s.io/v1,
 * as YAML/JSON data) is created; [] when it would be accepted.
 */
export function validateCustomResourceDefinition(crd: unknown): FieldError[] {
  const o = nodeOr(crd) ?? {};
  const meta = nodeOr(o.metadata) ?? {};
  const spec = nodeOr(o.spec) ?? {};
  const n = nodeOr(spec.names) ?? {};
  const sp = new FieldPath('spec');
  const errs: FieldError[] = [];
  const name = str(meta.name);
  if (name === '') errs.push(required(new FieldPath('metadata.name'), 'name or generateName is required'));
  else if (name !== `${str(n.plural)}.${str(spec.group)}`)
    errs.push(invalid(new FieldPath('metadata.name'), name, 'must be spec.names.plural+"."+spec.group'));
  const group = str(spec.group);
  if (group === '') errs.push(required(sp.child('group'), ''));
  else if (!DNS1123_SUBDOMAIN.test(group)) errs.push(invalid(sp.child('group'), group, 'must be a DNS-1123 subdomain'));
  else if (!group.includes('.')) errs.push(invalid(sp.child('group'), group, 'should be a domain with at least one dot'));
  const scope = str(spec.scope);
  if (scope === '') errs.push(required(sp.child('scope'), ''));
  else if (scope !== 'Cluster' && scope !== 'Namespaced')
    errs.push(notSupported(sp.child('scope'), scope, ['Cluster', 'Namespaced']));
  if (spec.preserveUnknownFields === true)
    errs.push(
      invalid(
        sp.child('preserveUnknownFields'),
        true,
        'cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead',
      ),
    );

  const versions = list(spec.versions).map((v) => nodeOr(v) ?? {});
  if (versions.length === 0) errs.push(required(sp.child('versions'), 'must have exactly one version marked as storage version'));
  const schemas = versions.map((v) => nodeOr(nodeOr(v.schema)?.openAPIV3Schema));
  const first = schemas[0];
  // Identical per-version schemas are hoisted to spec.validation (the internal form the API server validates).
  const hoisted = first !== undefined && schemas.every((s) => isDeepStrictEqual(s, first));
  const seen = new Set<string>();
  versions.forEach((v, i) => {
    const vp = sp.child('versions').index(i);
    const vn = str(v.name);
    errs.push(...dns1035(vp.child('name'), vn));
    seen.add(vn);
    if (schemas[i] === undefined) errs.push(required(vp.child('schema').child('openAPIV3Schema'), 'schemas are required'));
    else if (!hoisted)
      errs.push(...schemaErrors(schemas[i], nodeOr(nodeOr(v.subresources)?.status) !== undefined, vp.child('schema')));
    errs.push(...printerColumns(v.additionalPrinterColumns, vp.child('additionalPrinterColumns')));
  });
  if (hoisted)
    errs.push(
      ...schemaErrors(
        first,
        versions.some((v) => nodeOr(nodeOr(v.subresources)?.status) !== undefined),
        sp.child('validation'),
      ),
    );
  if (seen.size !== versions.length)
    errs.push(
      invalid(
        sp.child('versions'),
        versions.map((v) => str(v.name)),
        'must contain unique version names',
      ),
    );
  if (versions.filter((v) => v.storage === true).length !== 1)
    errs.push(
      invalid(
        sp.child('versions'),
        versions.map((v) => str(v.name)),
        'must have exactly one version marked as storage version',
      ),
    );
  errs.push(...names(n, sp.child('names')));
  return errs;
}
