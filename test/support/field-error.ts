// Field errors as the API server reports them (k8s.io/apimachinery
// pkg/util/validation/field): a path like
// `spec.versions[0].schema.openAPIV3Schema.properties[spec].anyOf[0].type`,
// a type, a detail; and the 422 Invalid Status that carries them.

/** field.Path built like the Go one: Child joins with ".", Key is `[k]`, Index is `[i]`. */
export class FieldPath {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  child(...names: string[]): FieldPath {
    return new FieldPath([this.text, ...names].filter((s) => s !== '').join('.'));
  }
  key(k: string): FieldPath {
    return new FieldPath(`${this.text}[${k}]`);
  }
  index(i: number): FieldPath {
    return new FieldPath(`${this.text}[${i}]`);
  }
}

export type FieldErrorType =
  | 'FieldValueRequired'
  | 'FieldValueForbidden'
  | 'FieldValueInvalid'
  | 'FieldValueNotSupported'
  | 'FieldValueDuplicate'
  | 'FieldValueTooMany';

export interface FieldError {
  readonly type: FieldErrorType;
  readonly field: string;
  readonly detail: string;
  /** The offending value (Invalid, NotSupported, Duplicate). */
  readonly value?: unknown;
}

const TYPE_TEXT: Record<FieldErrorType, string> = {
  FieldValueRequired: 'Required value',
  FieldValueForbidden: 'Forbidden',
  FieldValueInvalid: 'Invalid value',
  FieldValueNotSupported: 'Unsupported value',
  FieldValueDuplicate: 'Duplicate value',
  FieldValueTooMany: 'Too many',
};

export const required = (p: FieldPath, detail: string): FieldError => ({ type: 'FieldValueRequired', field: p.text, detail });
export const forbidden = (p: FieldPath, detail: string): FieldError => ({ type: 'FieldValueForbidden', field: p.text, detail });
export const invalid = (p: FieldPath, value: unknown, detail: string): FieldError => ({
  type: 'FieldValueInvalid',
  field: p.text,
  detail,
  value,
});
export const notSupported = (p: FieldPath, value: unknown, supported: readonly string[]): FieldError => ({
  type: 'FieldValueNotSupported',
  field: p.text,
  detail: `supported values: ${supported.map((s) => JSON.stringify(s)).join(', ')}`,
  value,
});
export const duplicate = (p: FieldPath, value: unknown): FieldError => ({
  type: 'FieldValueDuplicate',
  field: p.text,
  detail: '',
  value,
});

/** ErrorBody(): `Forbidden: detail`, `Invalid value: "x": detail`. */
export function errorBody(e: FieldError): string {
  const head = TYPE_TEXT[e.type];
  const value = 'value' in e ? `: ${JSON.stringify(e.value)}` : '';
  return e.detail === '' ? `${head}${value}` : `${head}${value}: ${e.detail}`;
}

/** Error(): `field: ErrorBody()`. */
export function errorText(e: FieldError): string {
  return `${e.field}: ${errorBody(e)}`;
}

/**
 * apierrors.NewInvalid: 422, reason Invalid, the message names the object and
 * lists the errors (in brackets when more than one), one cause per error.
 */
export function invalidStatus(group: string, kind: string, name: string, errors: readonly FieldError[]): Record<string, unknown> {
  const texts = errors.map(errorText);
  const list = texts.length === 1 ? (texts[0] ?? '') : `[${texts.join(', ')}]`;
  const qualified = group === '' ? kind : `${kind}.${group}`;
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `${qualified} "${name}" is invalid: ${list}`,
    reason: 'Invalid',
    details: {
      name,
      group,
      kind,
      causes: errors.map((e) => ({ reason: e.type, message: errorBody(e), field: e.field })),
    },
    code: 422,
  };
}
