// What /proc says of a process, for the fault harness: its command name and its parent, so that
// a PID is signalled only while it is still the process started, and a client finds its workerd.
import { readFileSync, readdirSync } from 'node:fs';

/** `{ command, parent }` of `pid`, or undefined once it is gone. */
export function processStat(pid) {
  let stat;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command is in parentheses and may hold spaces; the fields after it are plain.
  const close = stat.lastIndexOf(')');
  return { command: stat.slice(stat.indexOf('(') + 1, close), parent: Number(stat.slice(close + 2).split(' ')[1]) };
}

/** The PIDs of the children of `parent` named `command`. */
export function childrenNamed(parent, command) {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      const stat = processStat(pid);
      return stat?.parent === parent && stat.command === command;
    });
}
