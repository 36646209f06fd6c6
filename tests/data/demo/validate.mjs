// Validate a glTF/GLB file with the Khronos glTF-Validator and print its JSON report on stdout.
//
//   NODE_PATH=DIR/node_modules node validate.mjs MODEL.glb
//
// `gltf-validator` is resolved from NODE_PATH (the tests install it outside the repository).
// External resources (a .gltf's .bin) are read relative to the model's folder.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire( path.join( process.cwd(), 'noop.js' ) );
const validator = require( 'gltf-validator' );

const file = process.argv[ 2 ];
if ( ! file ) {

	console.error( 'usage: node validate.mjs MODEL.glb|MODEL.gltf' );
	process.exit( 2 );

}

const report = await validator.validateBytes( new Uint8Array( fs.readFileSync( file ) ), {
	uri: path.basename( file ),
	maxIssues: 0, // no limit
	externalResourceFunction: ( uri ) => Promise.resolve(
		new Uint8Array( fs.readFileSync( path.resolve( path.dirname( file ), decodeURIComponent( uri ) ) ) ) ),
} );
console.log( JSON.stringify( report, null, 1 ) );
