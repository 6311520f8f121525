// Objects the Pass-fold and tier-fold datapath tests share, over the upstream
// pods (test/cases/upstream-model.ts): x/a is isolated by a NetworkPolicy
// allowing ns y, x/b by none; Admin policies select x/a and x/b.
import { networkPolicy } from './raw.ts';

export const ALLOW_FROM_Y = networkPolicy('x', 'allow-from-y', {
  podSelector: { matchLabels: { pod: 'a' } },
  ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }],
});

/** An Admin policy's subject: pods a and b of ns x. */
export const X_A_AND_B = {
  pods: {
    namespaceSelector: { matchLabels: { ns: 'x' } },
    podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['a', 'b'] }] },
  },
};
