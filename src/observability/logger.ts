// pino JSON logger for the agent: one JSON object per line on stdout (or a
// given stream), ISO timestamps, level names instead of numbers so that log
// pipelines need no pino-specific mapping.
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function isLogLevel(s: string): s is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(s);
}

export interface LoggerOptions {
  readonly level: LogLevel;
  /** Static fields on every line (e.g. the node name). */
  readonly base?: Record<string, string>;
  /** Defaults to a synchronous stdout writer, so nothing is lost on exit. */
  readonly destination?: DestinationStream;
}

export function createLogger(opts: LoggerOptions): Logger {
  const dest = opts.destination ?? pino.destination({ dest: 1, sync: true });
  return pino(
    {
      level: opts.level,
      base: { component: 'nft-netpol-agent', ...opts.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // Errors become {type, message, stack} wherever they appear as `err`.
      serializers: { err: pino.stdSerializers.err },
    },
    dest,
  );
}

/** A logger that writes nothing: the default for unit tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
