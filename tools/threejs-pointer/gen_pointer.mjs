// three.js reference values for KHR_animation_pointer: load a model with three's GLTFLoader and the
// @needle-tools/three-animation-pointer plugin, play its first clip with an AnimationMixer (LoopOnce,
// clamped at the end) and write, at each time, the value of every pointer the clip animates, read
// back from the three.js object the plugin binds it to and converted to glTF's units.
//
//   node gen_pointer.mjs MODEL.glb --out OUT.json [--times 0,0.5,1]
//
// Made for skeletal's tests (tools/make_gltf29_truth.py); see README.md next to this file.

import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';

import * as THREE from 'three';
import { GLTFLoader } from 'three/examples/jsm/loaders/GLTFLoader.js';
import { GLTFAnimationPointerExtension } from '@needle-tools/three-animation-pointer';

const require = createRequire( import.meta.url );
const versionOf = ( pkg ) => {

	let dir = path.dirname( require.resolve( pkg ) );
	while ( ! fs.existsSync( path.join( dir, 'package.json' ) ) ) dir = path.dirname( dir );
	return JSON.parse( fs.readFileSync( path.join( dir, 'package.json' ), 'utf8' ) ).version;

};

function parseArgs( argv ) {

	const opts = { model: null, out: null, times: [ 0, 0.5, 1 ] };
	for ( let i = 0; i < argv.length; i ++ ) {

		if ( argv[ i ] === '--out' ) opts.out = argv[ ++ i ];
		else if ( argv[ i ] === '--times' ) opts.times = argv[ ++ i ].split( ',' ).map( Number );
		else opts.model = argv[ i ];

	}

	if ( ! opts.model || ! opts.out || opts.times.some( ( t ) => ! Number.isFinite( t ) ) ) {

		console.error( 'usage: node gen_pointer.mjs MODEL.glb --out OUT.json [--times 0,0.5,1]' );
		process.exit( 2 );

	}

	return opts;

}

// Textures need a DOM to decode; a blank Texture keeps material.map (and its transform) in place.
class BlankTextures {

	constructor( parser ) {

		this.name = 'skeletal_blank_textures';
		this.parser = parser;

	}

	loadTexture() {

		return Promise.resolve( new THREE.Texture() );

	}

}

// The glTF JSON as written (the plugin rewrites the pointers in parser.json while it loads).
function originalJson( bytes ) {

	if ( bytes.readUInt32LE( 0 ) !== 0x46546C67 ) return JSON.parse( bytes.toString( 'utf8' ) );
	const length = bytes.readUInt32LE( 12 );
	return JSON.parse( bytes.subarray( 20, 20 + length ).toString( 'utf8' ) );

}

const opts = parseArgs( process.argv.slice( 2 ) );
const bytes = fs.readFileSync( opts.model );
const written = originalJson( bytes );
const loader = new GLTFLoader();
loader.register( ( parser ) => new GLTFAnimationPointerExtension( parser ) );
loader.register( ( parser ) => new BlankTextures( parser ) );
const gltf = await loader.parseAsync( bytes.buffer.slice( bytes.byteOffset, bytes.byteOffset + bytes.byteLength ), '' );
const parser = gltf.parser, json = parser.json;

const nodeObject = new Map();
gltf.scene.traverse( ( o ) => {

	const a = parser.associations.get( o );
	if ( a && a.nodes !== undefined && ! nodeObject.has( a.nodes ) ) nodeObject.set( a.nodes, o );

} );
const holding = ( n, test ) => {

	const o = nodeObject.get( n );
	if ( ! o ) return null;
	if ( test( o ) ) return o;
	return o.children.find( test ) || null;

};
const materialObject = ( m ) => {

	let found = null;
	gltf.scene.traverse( ( o ) => {

		if ( ! found && o.isMesh && o.material && o.material.name === ( json.materials[ m ].name || '' ) ) found = o.material;

	} );
	return found;

};
const lightObject = ( l ) => {

	const n = json.nodes.findIndex( ( d ) => d.extensions && d.extensions.KHR_lights_punctual && d.extensions.KHR_lights_punctual.light === l );
	return holding( n, ( o ) => o.isLight );

};
const cameraObject = ( c ) => holding( json.nodes.findIndex( ( d ) => d.camera === c ), ( o ) => o.isCamera );
const rgba = ( m ) => [ ...m.color.toArray(), m.opacity ];
const TT = 'pbrMetallicRoughness/baseColorTexture/extensions/KHR_texture_transform/';

// pointer -> [three.js property read, function giving the glTF value]
function reader( pointer ) {

	let m;
	if ( ( m = pointer.match( /^\/nodes\/(\d+)\/(.+)$/ ) ) ) {

		const o = nodeObject.get( Number( m[ 1 ] ) );
		switch ( m[ 2 ] ) {

			case 'translation': return [ 'position', () => o.position.toArray() ];
			case 'rotation': return [ 'quaternion', () => o.quaternion.toArray() ];
			case 'scale': return [ 'scale', () => o.scale.toArray() ];
			case 'weights': return [ 'morphTargetInfluences', () => Array.from( o.morphTargetInfluences ) ];
			case 'extensions/KHR_node_visibility/visible': return [ 'visible', () => [ o.visible ? 1 : 0 ] ];

		}

	} else if ( ( m = pointer.match( /^\/materials\/(\d+)\/(.+)$/ ) ) ) {

		const mat = materialObject( Number( m[ 1 ] ) );
		switch ( m[ 2 ] ) {

			case 'pbrMetallicRoughness/baseColorFactor': return [ 'color + opacity', () => rgba( mat ) ];
			case 'pbrMetallicRoughness/metallicFactor': return [ 'metalness', () => [ mat.metalness ] ];
			case 'pbrMetallicRoughness/roughnessFactor': return [ 'roughness', () => [ mat.roughness ] ];
			case 'emissiveFactor': return [ 'emissive', () => mat.emissive.toArray() ];
			case 'alphaCutoff': return [ 'alphaTest', () => [ mat.alphaTest ] ];
			case 'extensions/KHR_materials_emissive_strength/emissiveStrength': return [ 'emissiveIntensity', () => [ mat.emissiveIntensity ] ];
			case TT + 'offset': return [ 'map.offset', () => mat.map.offset.toArray() ];
			case TT + 'scale': return [ 'map.repeat', () => mat.map.repeat.toArray() ];
			case TT + 'rotation': return [ 'map.rotation', () => [ mat.map.rotation ] ];

		}

	} else if ( ( m = pointer.match( /^\/extensions\/KHR_lights_punctual\/lights\/(\d+)\/(.+)$/ ) ) ) {

		const light = lightObject( Number( m[ 1 ] ) );
		switch ( m[ 2 ] ) {

			case 'color': return [ 'color', () => light.color.toArray() ];
			case 'intensity': return [ 'intensity', () => [ light.intensity ] ];
			case 'range': return [ 'distance', () => [ light.distance ] ];
			case 'spot/innerConeAngle': return [ 'penumbra (the plugin writes the angle there)', () => [ light.penumbra ] ];
			case 'spot/outerConeAngle': return [ 'angle', () => [ light.angle ] ];

		}

	} else if ( ( m = pointer.match( /^\/cameras\/(\d+)\/(.+)$/ ) ) ) {

		const cam = cameraObject( Number( m[ 1 ] ) );
		switch ( m[ 2 ] ) {

			case 'perspective/yfov': return [ 'fov (degrees, converted back)', () => [ cam.fov * Math.PI / 180 ] ];
			case 'perspective/znear': case 'orthographic/znear': return [ 'near', () => [ cam.near ] ];
			case 'perspective/zfar': case 'orthographic/zfar': return [ 'far', () => [ cam.far ] ];
			case 'orthographic/xmag': case 'orthographic/ymag': return [ 'zoom (xmag and ymag both write it)', () => [ cam.zoom ] ];

		}

	}

	return null;

}

const anim = written.animations[ 0 ];
const pointers = anim.channels.map( ( c ) => c.target.extensions.KHR_animation_pointer.pointer );
const clip = gltf.animations[ 0 ];
const mixer = new THREE.AnimationMixer( gltf.scene );
const action = mixer.clipAction( clip );
action.setLoop( THREE.LoopOnce, 1 );
action.clampWhenFinished = true;
action.play();

const out = {
	format: 'skeletal-pointer-truth/1',
	generator: { three: versionOf( 'three' ), '@needle-tools/three-animation-pointer': versionOf( '@needle-tools/three-animation-pointer' ),
		script: 'tools/threejs-pointer/gen_pointer.mjs' },
	model: { file: path.basename( opts.model ), bytes: bytes.length, sha256: crypto.createHash( 'sha256' ).update( bytes ).digest( 'hex' ) },
	clip: clip.name, duration: clip.duration, three_tracks: clip.tracks.map( ( t ) => t.name ),
	times: opts.times, pointers: {},
};
const readers = {};
for ( const p of pointers ) {

	const r = reader( p );
	if ( r ) {

		const channel = anim.channels[ pointers.indexOf( p ) ];
		const interpolation = anim.samplers[ channel.sampler ].interpolation || 'LINEAR';
		const bound = ! p.endsWith( 'KHR_texture_transform/rotation' );
		readers[ p ] = r[ 1 ];
		out.pointers[ p ] = { three: r[ 0 ], interpolation, values: [] };
		// What the plugin does not do (1.0.7): interpolate CUBICSPLINE pointer channels (its check
		// compares three's interpolation constant with the string 'CUBICSPLINE', so the raw records are
		// read, first the in-tangent), and bind the base colour texture's rotation.
		if ( interpolation === 'CUBICSPLINE' ) out.pointers[ p ].not_by_three = 'CUBICSPLINE pointer channels are not interpolated by the plugin';
		else if ( ! bound ) out.pointers[ p ].not_by_three = 'the plugin binds no property for it (the value stays the rest value)';

	}

}

for ( const t of opts.times ) {

	mixer.setTime( t );
	for ( const p in readers ) out.pointers[ p ].values.push( readers[ p ]().map( ( v ) => Number( v.toPrecision( 10 ) ) ) );

}

out.summary = `${Object.keys( out.pointers ).length} pointers at ${opts.times.length} times, ${clip.tracks.length} three.js tracks`;
fs.writeFileSync( opts.out, JSON.stringify( out ) + '\n' );
console.log( `${path.basename( opts.model )}: ${out.summary} -> ${opts.out}` );
