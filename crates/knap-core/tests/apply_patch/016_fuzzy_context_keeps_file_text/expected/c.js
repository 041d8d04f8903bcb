if (x) {   
	call2();
}
