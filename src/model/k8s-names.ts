// Syntax checks of Kubernetes names, label keys/values and port names, after
// k8s.io/apimachinery/pkg/util/validation. Each returns the list of problems
// ([] = valid) so callers can report every message like the API server does.

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
// The name part of a label key and a (non-empty) label value share this syntax.
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** Object names of most kinds (Pod, NetworkPolicy, Node). */
export function dns1123SubdomainErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 253) errs.push('must be no more than 253 characters');
  if (!DNS1123_SUBDOMAIN.test(value)) {
    errs.push(
      "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')",
    );
  }
  return errs;
}

/** Namespace names. */
export function dns1123LabelErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push('must be no more than 63 characters');
  if (!DNS1123_LABEL.test(value)) {
    errs.push(
      "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name')",
    );
  }
  return errs;
}

/** Label keys: an optional DNS subdomain prefix and '/', then a name of at most 63 characters. */
export function labelKeyErrors(key: string): string[] {
  const parts = key.split('/');
  let name = key;
  const errs: string[] = [];
  if (parts.length === 2) {
    const [prefix = '', n = ''] = parts;
    name = n;
    if (prefix.length === 0) errs.push('prefix part must be non-empty');
    else for (const m of dns1123SubdomainErrors(prefix)) errs.push(`prefix part ${m}`);
  } else if (parts.length > 2) {
    return [`a qualified name must consist of an optional DNS subdomain prefix and '/' and a name (e.g. 'example.com/MyName')`];
  }
  if (name.length === 0) errs.push('name part must be non-empty');
  else {
    if (name.length > 63) errs.push('name part must be no more than 63 characters');
    if (!QUALIFIED_NAME_PART.test(name)) {
      errs.push(
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')",
      );
    }
  }
  return errs;
}

export function labelValueErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push('must be no more than 63 characters');
  if (value !== '' && !QUALIFIED_NAME_PART.test(value)) {
    errs.push(
      "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', 'my_value' or '12345')",
    );
  }
  return errs;
}

/** IANA service names as container port names (validation.IsValidPortName). */
export function portNameErrors(name: string): string[] {
  const errs: string[] = [];
  if (name.length > 15) errs.push('must be no more than 15 characters');
  if (!/^[-a-z0-9]+$/.test(name)) errs.push('must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)');
  if (!/[a-z]/.test(name)) errs.push('must contain at least one letter (a-z)');
  if (name.includes('--')) errs.push('must not contain consecutive hyphens');
  if (name.startsWith('-') || name.endsWith('-')) errs.push('must not begin or end with a hyphen');
  return errs;
}

/** True for an integer in 1..65535 (validation.IsValidPortNum). */
export function isPortNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 65535;
}

export const PORT_RANGE_MESSAGE = 'must be between 1 and 65535, inclusive';
