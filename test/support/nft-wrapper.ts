// A shell wrapper around the real nft for tests that make the agent's
// transactions fail or hang: for `nft -f` and for each line of the agent's
// long-lived `nft -i` (passed on to a real nft -i through a FIFO, except the
// transactions a flag fails or holds; the agent's sync lines always go on, so
// nft answers them as usual). Listings and anything else pass through.

export interface WrapperFlags {
  /** Transactions fail (with `message` on stderr) while this file exists. */
  readonly fail: string;
  /** Transactions wait 30 s first while this file exists (the wrapper's pid goes to `sleeping`). */
  readonly slow?: { readonly flag: string; readonly sleeping: string };
  /** While this file exists `nft -i` fails at once, as an nft built without its interactive CLI. */
  readonly nocli?: string;
  readonly message: string;
  /** The real nft (default: nft on PATH). */
  readonly nft?: string;
}

function q(s: string): string {
  if (/['\n]/.test(s)) throw new Error(`unsafe path for a shell script: ${s}`);
  return `'${s}'`;
}

export function nftWrapperScript(f: WrapperFlags): string {
  const nft = q(f.nft ?? 'nft');
  const msg = q(f.message);
  const slow = f.slow === undefined ? '' : `if [ -e ${q(f.slow.flag)} ]; then echo $$ > ${q(f.slow.sleeping)}; sleep 30; fi`;
  const nocli =
    f.nocli === undefined
      ? ''
      : `  if [ -e ${q(f.nocli)} ]; then echo "Error: no interactive CLI in this build (test wrapper)" >&2; exit 1; fi\n`;
  return `#!/bin/sh
if [ "$1" = "-i" ]; then
${nocli}  fifo="$(mktemp -u)"
  mkfifo "$fifo"
  ${nft} -i < "$fifo" &
  exec 3> "$fifo"
  rm -f "$fifo"
  while IFS= read -r line; do
    case "$line" in
      nft-netpol-sync-*) ;;
      *)
        ${slow}
        if [ -e ${q(f.fail)} ]; then echo ${msg} >&2; continue; fi
        ;;
    esac
    printf '%s\\n' "$line" >&3
  done
  exec 3>&-
  wait
  exit 0
fi
for a in "$@"; do
  if [ "$a" = "-f" ]; then
    if [ -e ${q(f.fail)} ]; then cat >/dev/null; echo ${msg} >&2; exit 1; fi
    ${slow}
  fi
done
exec ${nft} "$@"
`;
}
