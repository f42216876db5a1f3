// sudo resolves the machine's host name on every command and, when that fails, says
// "sudo: unable to resolve host <name>: …" on stderr (a machine whose name is in no /etc/hosts
// and no DNS). scripts/prerequisites.sh adds the name to /etc/hosts; tests that compare what a
// sudo command wrote take that line out, so they hold on such a machine too.

const WARNING = String.raw`sudo: unable to resolve host [^\n]*`;
/** A "[stderr]" section (as the service stores output) holding nothing but the warning. */
const ONLY_WARNING = new RegExp(String.raw`(^|\n)\[stderr\]\n${WARNING}(?=\n\[|$)`, 'g');
const WARNING_LINE = new RegExp(String.raw`^${WARNING}(\n|$)`, 'gm');

/** The text without sudo's host-name warning: raw stderr, or output as stored (`[stderr]` sections). */
export function withoutHostWarning(text: string): string {
  return text.replace(ONLY_WARNING, '').replace(WARNING_LINE, '');
}
