// A script of top-level commands as one line, for a long-lived `nft -i`
// (session.ts), which runs each line it reads as one transaction. nft treats
// `;` like a newline between commands; a line break inside an element list
// (after a comma) is only white space. Anything else that spans lines (a
// `table { ... }` block of a full script) has no one-line form here.

/**
 * The commands of `script` joined by `; ` on one line, `#` comments dropped;
 * undefined when a line break falls inside a block other than an element
 * list, a quoted string spans lines (nft strings cannot), or there is a
 * carriage return or backslash (neither is in what the renderer writes).
 */
export function oneLine(script: string): string | undefined {
  let out = '';
  let depth = 0;
  let open = false; // a command is being written to `out`
  let lineStart = 0;
  while (lineStart <= script.length) {
    let lineEnd = script.indexOf('\n', lineStart);
    if (lineEnd < 0) lineEnd = script.length;
    // The line up to a comment outside quotes; braces counted outside quotes.
    let quoted = false;
    let end = lineEnd;
    const depthBefore = depth;
    for (let i = lineStart; i < lineEnd; i++) {
      const c = script.charCodeAt(i);
      if (c === 34 /* " */) quoted = !quoted;
      else if (quoted) continue;
      else if (c === 35 /* # */) {
        end = i;
        break;
      } else if (c === 123 /* { */) depth++;
      else if (c === 125 /* } */) depth--;
      // nft -i would join a line ending in a backslash with the next (the sync line).
      else if (c === 13 /* \r */ || c === 92 /* \\ */) return undefined;
    }
    if (quoted || depth < 0) return undefined;
    const text = script.slice(lineStart, end).replace(/\t/g, ' ').trim();
    if (text !== '') {
      if (!open) {
        out += text;
        open = true;
      } else if (depthBefore > 0) {
        // Inside braces a line break is only allowed after a list's comma.
        if (!out.endsWith(',')) return undefined;
        out += ` ${text}`;
      } else {
        out = `${out.replace(/[;\s]+$/, '')}; ${text}`;
      }
    } else if (depthBefore > 0 && depth > 0 && open && !out.endsWith(',')) {
      return undefined;
    }
    lineStart = lineEnd + 1;
  }
  if (depth !== 0) return undefined;
  return out.replace(/[;\s]+$/, '');
}
