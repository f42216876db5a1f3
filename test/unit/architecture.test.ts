// The shape of src/ (CONTRIBUTING.md): core imports no feature, and no module imports itself back
// through others, type-only imports included. Reads the sources as text; needs no service.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'(\.[^']+)'|(?:^|\n)\s*import\s+'(\.[^']+)'/g;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'generated' ? [] : sources(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

/** Every module of src/ and the modules of src/ it imports (values and types alike). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)]
      .map((m) => path.resolve(path.dirname(file), (m[1] ?? m[2])!).replace(/\.js$/, '.ts'))
      .filter((t) => t.startsWith(SRC) && !t.includes(`${path.sep}generated${path.sep}`));
    graph.set(path.relative(SRC, file), [...new Set(targets.map((t) => path.relative(SRC, t)))]);
  }
  return graph;
}

/** Strongly connected components with more than one module (Tarjan): the import cycles. */
function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    indices.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!));
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return found;
}

/** The feature folder a module belongs to, or null for core and the composition files at the top of src/. */
function featureOf(module: string): string | null {
  const [first, ...rest] = module.split(path.sep);
  return rest.length === 0 || first === 'core' ? null : first!;
}

/** Which feature folders each feature folder imports from. */
function folderGraph(graph: Map<string, string[]>): Map<string, string[]> {
  const folders = new Map<string, Set<string>>();
  for (const [from, targets] of graph) {
    const a = featureOf(from);
    if (!a) continue;
    const uses = folders.get(a) ?? new Set<string>();
    for (const t of targets) {
      const b = featureOf(t);
      if (b && b !== a) uses.add(b);
    }
    folders.set(a, uses);
  }
  return new Map([...folders].map(([a, uses]) => [a, [...uses]]));
}

describe('src/ layering', () => {
  const graph = importGraph();

  it('reads the whole tree', () => {
    expect(graph.size).toBeGreaterThan(80);
  });

  it('core imports no feature', () => {
    const wrong = [...graph].flatMap(([from, targets]) =>
      from.startsWith(`core${path.sep}`) ? targets.filter((t) => !t.startsWith(`core${path.sep}`)).map((t) => `${from} → ${t}`) : [],
    );
    expect(wrong).toEqual([]);
  });

  it('has no import cycles, type-only imports included', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('has no cycle between feature folders', () => {
    expect(cycles(folderGraph(graph))).toEqual([]);
  });

  it("a feature uses another only through that feature's index.ts", () => {
    const wrong = [...graph].flatMap(([from, targets]) =>
      targets
        .filter((t) => featureOf(t) && featureOf(from) && featureOf(t) !== featureOf(from) && path.basename(t) !== 'index.ts')
        .map((t) => `${from} → ${t}`),
    );
    expect(wrong).toEqual([]);
  });
});
