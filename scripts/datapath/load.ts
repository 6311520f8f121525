// Load generator of scripts/bench-datapath.ts, run inside a pod's network
// namespace (`ip netns exec`):
//   serve PORT                       accept TCP connections on PORT and forget them
//   connect HOST PORT COUNT CONC     open COUNT connections, CONC at a time, each
//                                    closed by RST as soon as it is established
//                                    (no TIME_WAIT, so runs can follow each other);
//                                    prints {"count","errors","ms"} as JSON
import { connect, createServer } from 'node:net';

const [mode, ...args] = process.argv.slice(2);

if (mode === 'serve') {
  const server = createServer({ noDelay: true }, (s) => {
    s.on('error', () => undefined);
    s.on('end', () => s.destroy());
  });
  server.listen({ port: Number(args[0]), host: '::', backlog: 4096 }, () => process.stdout.write('ready\n'));
} else if (mode === 'connect') {
  const [host = '', port = '0', count = '0', conc = '0'] = args;
  const total = Number(count);
  let started = 0;
  let done = 0;
  let errors = 0;
  const t0 = process.hrtime.bigint();
  const finish = (): void => {
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    process.stdout.write(`${JSON.stringify({ count: done, errors, ms })}\n`);
  };
  const one = (): void => {
    if (started >= total) return;
    started += 1;
    const s = connect({ host, port: Number(port), noDelay: true });
    s.setTimeout(2000, () => s.destroy(new Error('timeout')));
    s.on('connect', () => s.resetAndDestroy());
    s.on('error', () => {
      errors += 1;
    });
    s.on('close', () => {
      done += 1;
      if (done === total) finish();
      else one();
    });
  };
  for (let i = 0; i < Number(conc); i++) one();
} else {
  process.stderr.write('usage: load.ts serve PORT | connect HOST PORT COUNT CONCURRENCY\n');
  process.exit(2);
}
