// Generates TypeScript types for an OpenAPI document with openapi-typescript, as a client
// project would (`test/generated-client.test.ts` runs it in a child process). It lives in this
// package so it resolves the openapi-typescript and TypeScript 5 installed here: the
// generator needs TypeScript's JS API, which the project's TypeScript 7 does not have.
//
// Usage: node generate.mjs <openapi.json> <out.ts>
//
// Raw bytes (`type: string, format: binary`) become `Blob`, the transform the generator's
// documentation gives for binary schemas: the document marks every raw request and response
// body that way.
import fs from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';

const [source, out] = process.argv.slice(2);
if (source === undefined || out === undefined) {
  process.stderr.write('usage: node generate.mjs <openapi.json> <out.ts>\n');
  process.exit(2);
}
const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier('Blob'));
const ast = await openapiTS(pathToFileURL(source), {
  transform(schema) {
    if (schema.type === 'string' && schema.format === 'binary') return BLOB;
    return undefined;
  },
});
await fs.writeFile(out, astToString(ast));
